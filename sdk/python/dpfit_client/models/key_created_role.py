from enum import StrEnum


class KeyCreatedRole(StrEnum):
    ADMIN = "admin"
    ANALYST = "analyst"
    OWNER = "owner"

    def __str__(self) -> str:
        return str(self.value)
