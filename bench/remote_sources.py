"""Read throughput of SQL-table and object-store sources through the worker's reader.

`python -m bench.remote_sources [--rows N]` (needs the local PostgreSQL server and starts moto's
S3 server on loopback): the same N rows (x1..x4 numeric, c categorical, y binary label) as a
PostgreSQL table, as a local Parquet folder, and as the same Parquet folder in a bucket; for each,
the time of ``count_rows``, ``fingerprint`` and ``read_encoded`` (rows/s) and how far the
process's RSS peaks above its level before the read (each source in a fresh process; the encoded
X itself takes n × 7 × 8 bytes). Prints a markdown table. Not a test: speed goes here.
"""

from __future__ import annotations

import argparse
import functools
import io
import multiprocessing
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import sqlalchemy as sa

from service.data.encoding import Encoder
from service.data.object_store import open_object_store_source
from service.data.reader import read_encoded
from service.data.sources import local_source
from service.data.spec import CategoricalFeature, LabelSpec, NumericFeature
from service.data.sql_source import open_sql_source
from service.settings import Settings
from tests.support.fixtures import _fresh_postgres_database
from tests.support.s3_server import running_s3_server

FEATURES = [
    *(NumericFeature(name=f"x{i}", min=-3, max=3) for i in range(1, 5)),
    CategoricalFeature(name="c", categories=["a", "b", "c"]),
]
LABEL = LabelSpec(column="y", type="binary", positive="yes", negative="no")
PARTS = 4


def make_table(rows: int) -> pa.Table:
    rng = np.random.default_rng(0)
    columns: dict[str, Any] = {"id": np.arange(rows, dtype=np.int64)}
    for i in range(1, 5):
        columns[f"x{i}"] = rng.normal(size=rows)
    columns["c"] = rng.choice(np.array(["a", "b", "c"], dtype=object), size=rows)
    columns["y"] = rng.choice(np.array(["yes", "no"], dtype=object), size=rows)
    return pa.table(columns)


def _status_mib(field: str) -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


def reset_peak_rss() -> float:
    """Reset the peak RSS (Linux: ``5`` to ``/proc/self/clear_refs``); returns the current RSS."""
    with open("/proc/self/clear_refs", "w") as clear:
        clear.write("5")
    return _status_mib("VmRSS")


def peak_rss_mib() -> float:
    return _status_mib("VmHWM")


def measure(name: str, open_source: Callable[[], Any], rows: int) -> dict[str, Any]:
    """Measured in a fresh process, so that its peak RSS is this source's alone."""
    context = multiprocessing.get_context("spawn")
    with context.Pool(1) as pool:
        return pool.apply(_measure, (name, open_source, rows))  # type: ignore[no-any-return]


def _measure(name: str, open_source: Callable[[], Any], rows: int) -> dict[str, Any]:
    source = open_source()

    def timed(action: Callable[[], Any]) -> float:
        start = time.perf_counter()
        action()
        return time.perf_counter() - start

    count_s = timed(source.count_rows)
    fingerprint_s = timed(source.fingerprint)
    before = reset_peak_rss()
    read_s = timed(lambda: read_encoded(source, Encoder(FEATURES), LABEL, None))
    return {
        "source": name,
        "count_s": count_s,
        "fingerprint_s": fingerprint_s,
        "read_s": read_s,
        "rows_per_s": rows / read_s,
        "peak_rss_growth_mib": peak_rss_mib() - before,
        "x_mib": rows * (4 + 3) * 8 / 2**20,
    }


def run(rows: int) -> list[dict[str, Any]]:
    table = make_table(rows)
    results = []
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch) / "parts"
        folder.mkdir()
        step = -(-rows // PARTS)
        blobs = []
        for part in range(PARTS):
            buffer = io.BytesIO()
            pq.write_table(table.slice(part * step, step), buffer)
            blobs.append(buffer.getvalue())
            (folder / f"part-{part}.parquet").write_bytes(blobs[-1])
        opener = functools.partial(local_source, folder, "parquet")
        results.append(measure("local Parquet folder", opener, rows))

        for url in _fresh_postgres_database():
            engine = sa.create_engine(url)
            with engine.begin() as conn:
                conn.execute(
                    sa.text(
                        "CREATE TABLE data (id bigint PRIMARY KEY, x1 double precision, "
                        "x2 double precision, x3 double precision, x4 double precision, "
                        "c text, y text)"
                    )
                )
                raw = conn.connection.driver_connection
                with raw.cursor().copy("COPY data FROM STDIN") as copy:  # type: ignore[union-attr]
                    for record in zip(
                        *(table.column(n).to_pylist() for n in table.column_names), strict=True
                    ):
                        copy.write_row(record)
            engine.dispose()
            settings = Settings(
                database_url="sqlite://",
                data_roots=(),
                workers=1,
                dask_scheduler=None,
                sql_connections={"bench": url},
            )
            opener = functools.partial(open_sql_source, "sql://bench/data", settings)
            results.append(measure("PostgreSQL table", opener, rows))

        with running_s3_server(Path(scratch)) as s3:
            os.environ.update(s3.env())
            for part, blob in enumerate(blobs):
                s3.put("bench", f"data/parts/part-{part}.parquet", blob)
            settings = Settings(
                database_url="sqlite://",
                data_roots=(),
                workers=1,
                dask_scheduler=None,
                object_store_roots=("s3://bench/data",),
            )
            opener = functools.partial(open_object_store_source, "s3://bench/data/parts", settings)
            results.append(measure("S3 Parquet folder (moto)", opener, rows))
    return results


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.remote_sources")
    parser.add_argument("--rows", type=int, default=1_000_000)
    args = parser.parse_args()
    results = run(args.rows)
    print(f"n = {args.rows:,} rows, 4 numeric + 1 categorical feature, binary label\n")
    print(f"(the encoded X alone: {results[0]['x_mib']:.0f} MiB)\n")
    print("| source | count_rows s | fingerprint s | read_encoded s | rows/s | peak RSS +MiB |")
    print("|---|---|---|---|---|---|")
    for r in results:
        print(
            f"| {r['source']} | {r['count_s']:.2f} | {r['fingerprint_s']:.2f} | "
            f"{r['read_s']:.2f} | {r['rows_per_s']:,.0f} | {r['peak_rss_growth_mib']:.0f} |"
        )


if __name__ == "__main__":
    main()
