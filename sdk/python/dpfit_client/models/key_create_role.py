from enum import StrEnum


class KeyCreateRole(StrEnum):
    ADMIN = "admin"
    ANALYST = "analyst"
    OWNER = "owner"

    def __str__(self) -> str:
        return str(self.value)
