from enum import StrEnum


class DatasetSourceOutFormat(StrEnum):
    CSV = "csv"
    PARQUET = "parquet"
    SQL = "sql"

    def __str__(self) -> str:
        return str(self.value)
