"""Registration refuses a source whose header names a declared feature or the label column more
than once (``age,age,income``): 422 naming the column — public schema — never a cell value.
Before, the first ``age`` was used and the validation report said nothing."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.support.inprocess import InProcessServer
from tests.support.walkthrough import COPIES

SECRET = "63.5"  # a cell value: never in an answer


def _body(uri: str) -> dict[str, Any]:
    return {
        "name": "dup",
        "source": {"uri": uri},
        "label": {"column": "income", "positive": "hi", "negative": "lo"},
        "features": [
            {"name": "age", "type": "numeric", "min": 18, "max": 90},
            {"name": "hours", "type": "numeric", "min": 1, "max": 99},
        ],
        "budget": {"epsilon": 1.0, "delta": 1e-5},
    }


def _csv(header: str) -> str:
    name = f"dup-{uuid.uuid4().hex[:10]}.csv"
    rows = [f"{SECRET},30,40,hi", "20,25,35,lo", "50,55,20,hi"]
    (COPIES / name).write_text("\n".join([header, *rows]) + "\n")
    return name


@pytest.fixture
def owner(sqlite_app: InProcessServer) -> Any:
    return sqlite_app.client(sqlite_app.key("dup-owner", "owner"))


@pytest.mark.parametrize(
    ("header", "column"),
    [("age,age,hours,income", "age"), ("age,hours,income,income", "income")],
)
def test_a_repeated_declared_column_is_refused_by_name(
    owner: Any, header: str, column: str
) -> None:
    response = owner.post("/v1/datasets", json=_body(_csv(header)))
    assert response.status_code == 422, response.text
    problem = response.json()
    assert problem["field"] == "source.uri"
    assert f"named more than once in the source's header: {column!r}" in problem["detail"]
    assert SECRET not in response.text


def test_a_repeated_column_nobody_declared_is_no_reason_to_refuse(owner: Any) -> None:
    response = owner.post("/v1/datasets", json=_body(_csv("age,hours,note,income,note")))
    assert response.status_code == 201, response.text
    assert response.json()["validation"]["rows"] == 3


def test_a_parquet_file_with_a_repeated_name_is_refused_the_same_way(owner: Any) -> None:
    name = f"dup-{uuid.uuid4().hex[:10]}.parquet"
    columns = [[float(SECRET), 20.0, 50.0], [30.0, 25.0, 55.0], [40.0, 35.0, 20.0]]
    table = pa.table(
        [*map(pa.array, columns), pa.array(["hi", "lo", "hi"])],
        names=["age", "age", "hours", "income"],
    )
    pq.write_table(table, Path(COPIES) / name)
    response = owner.post("/v1/datasets", json=_body(name))
    assert response.status_code == 422, response.text
    assert response.json()["field"] == "source.uri"
    assert "named more than once in the source's header: 'age'" in response.json()["detail"]
    assert SECRET not in response.text
