from enum import StrEnum


class JobEstimateOutAccounting(StrEnum):
    GAUSSIAN = "gaussian"
    PURE = "pure"
    RENYI = "renyi"

    def __str__(self) -> str:
        return str(self.value)
