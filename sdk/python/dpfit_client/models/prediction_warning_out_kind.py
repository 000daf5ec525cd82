from enum import StrEnum


class PredictionWarningOutKind(StrEnum):
    MISSING = "missing"
    OUT_OF_BOUNDS = "out_of_bounds"
    UNKNOWN_CATEGORY = "unknown_category"

    def __str__(self) -> str:
        return str(self.value)
