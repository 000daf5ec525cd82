"""Registration fixes a Parquet folder's per-file fingerprints with its whole fingerprint, in one
pass (data-parallel workers check only the files they read: tests/live/test_data_parallel.py)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from service.data.sources import local_source
from service.db.models import Dataset
from tests.support.inprocess import bearer, in_process_app

BODY = {
    "name": "folder",
    "label": {"column": "y", "positive": "yes", "negative": "no"},
    "features": [{"name": "x", "type": "numeric", "min": -1.0, "max": 1.0}],
    "budget": {"epsilon": 1.0, "delta": 1e-6},
}


def test_a_parquet_folder_is_registered_with_each_files_fingerprint(tmp_path: Path) -> None:
    folder = tmp_path / "data" / "folder"
    folder.mkdir(parents=True)
    for k in range(3):
        table = pa.table({"x": [0.1 * k, -0.2, 0.3], "y": ["yes", "no", "yes"]})
        pq.write_table(table, folder / f"part-{k}.parquet")
    (tmp_path / "data" / "single.csv").write_text("x,y\n0.5,yes\n-0.5,no\n")
    with in_process_app(f"sqlite:///{tmp_path / 'dpfit.db'}", tmp_path / "data") as (client, admin):
        owner = client.post("/v1/keys", json={"name": "o", "role": "owner"}, headers=bearer(admin))
        headers = bearer(owner.json()["key"])
        ids = []
        for uri in ("folder", "single.csv"):
            made = client.post(
                "/v1/datasets", json={**BODY, "source": {"uri": uri}}, headers=headers
            )
            assert made.status_code == 201, made.text
            ids.append(made.json()["id"])
        with client.app.state.sessions() as session:  # type: ignore[attr-defined]
            folder_row, file_row = (session.get(Dataset, i) for i in ids)
            assert folder_row is not None and file_row is not None
            whole, files = local_source(folder, "parquet").fingerprints()
            assert folder_row.fingerprint == whole
            assert folder_row.file_fingerprints == files and len(files or {}) == 3
            assert file_row.file_fingerprints is None
