from enum import StrEnum


class KeyOutRole(StrEnum):
    ADMIN = "admin"
    ANALYST = "analyst"
    OWNER = "owner"

    def __str__(self) -> str:
        return str(self.value)
