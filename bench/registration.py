"""Registration cost: fingerprint, whole-source validation and the whole `register_dataset`.

Registration parses the whole source with the workers' reader (so any refusal comes before a
budget exists); this measures what that costs on a credit-like file of ``--rows`` rows, CSV and
Parquet, in-process on SQLite. Not a test: timings depend on the machine and its load.

Run: ``python -m bench.registration [--rows 1000000]``.
"""

from __future__ import annotations

import argparse
import importlib.util
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from service.cli import migrate
from service.data.backends import open_source
from service.data.reader import validate_source
from service.db.session import make_engine, session_factory
from service.domain.registration import register_dataset
from service.schemas import DatasetCreate
from service.settings import Settings
from tests.support.walkthrough import CREDIT_FEATURES, CREDIT_LABEL, EXAMPLES


@dataclass(frozen=True)
class _Owner:
    name: str = "bench-owner"
    is_admin: bool = False


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--rows", type=int, default=1_000_000)


def run(args: argparse.Namespace) -> None:
    root = Path(tempfile.mkdtemp(prefix="dpfit-bench-registration-"))
    spec = importlib.util.spec_from_file_location("make_example", EXAMPLES / "make_example.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    frame = module.make(args.rows)
    frame.to_csv(root / "data.csv", index=False)
    frame.to_parquet(root / "data.parquet")
    url = f"sqlite:///{root / 'dpfit.db'}"
    migrate(url)
    sessions = session_factory(make_engine(url))
    settings = Settings.from_env({"DPFIT_DATA_ROOTS": str(root), "DPFIT_DATABASE_URL": url})
    header = "| MB | fingerprint s | validate s | rows/s | register s |"
    print(f"| source ({args.rows:,} rows) {header}")
    print("|---|---|---|---|---|---|")
    for name in ("data.csv", "data.parquet"):
        body = DatasetCreate.model_validate(
            {
                "name": name,
                "source": {"uri": name},
                "label": CREDIT_LABEL,
                "features": CREDIT_FEATURES,
                "budget": {"epsilon": 1.0, "delta": 1e-6},
            }
        )
        source = open_source(name, settings)
        start = time.perf_counter()
        source.fingerprint()
        digest = time.perf_counter() - start
        start = time.perf_counter()
        validate_source(source, body.features, body.label)
        validate = time.perf_counter() - start
        start = time.perf_counter()
        register_dataset(sessions=sessions, principal=_Owner(), body=body, settings=settings)
        register = time.perf_counter() - start
        size = (root / name).stat().st_size / 1e6
        print(
            f"| {name} | {size:.1f} | {digest:.2f} | {validate:.2f} | "
            f"{args.rows / validate:,.0f} | {register:.2f} |"
        )
    shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m bench.registration")
    add_arguments(parser)
    run(parser.parse_args())
