from enum import StrEnum


class DatasetOutExecution(StrEnum):
    IN_DATABASE = "in_database"
    WORKERS = "workers"

    def __str__(self) -> str:
        return str(self.value)
