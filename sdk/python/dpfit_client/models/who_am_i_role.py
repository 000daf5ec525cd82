from enum import StrEnum


class WhoAmIRole(StrEnum):
    ADMIN = "admin"
    ANALYST = "analyst"
    OWNER = "owner"

    def __str__(self) -> str:
        return str(self.value)
