from enum import StrEnum


class BudgetHistoryPointKind(StrEnum):
    CHARGE = "charge"
    REFUND = "refund"

    def __str__(self) -> str:
        return str(self.value)
