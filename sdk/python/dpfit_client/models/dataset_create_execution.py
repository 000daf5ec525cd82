from enum import StrEnum


class DatasetCreateExecution(StrEnum):
    IN_DATABASE = "in_database"
    WORKERS = "workers"

    def __str__(self) -> str:
        return str(self.value)
