from enum import StrEnum


class LabelSpecType(StrEnum):
    BINARY = "binary"
    CATEGORICAL = "categorical"
    NUMERIC = "numeric"

    def __str__(self) -> str:
        return str(self.value)
