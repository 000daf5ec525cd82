from enum import StrEnum


class ChargeOutKind(StrEnum):
    CHARGE = "charge"
    REFUND = "refund"

    def __str__(self) -> str:
        return str(self.value)
