"""in-database, part ``default``: the job an analyst gets by default, whole, in the database vs
the worker path, each in a fresh interpreter (peak RSS and wall time of the whole job).

`python -m bench in-database --rows N --parts default` prices ``{"model": {"type":
"logistic_regression"}}`` at the bench's target (ε = 1, δ = 1e-6) on the bench's table exactly as
the service does (``service.domain.submission.price_job``: ``auto`` resolves the optimizer, the
model and every hyper-parameter from n, the width, ε and δ), then runs that plan

- **in the database**: fingerprint + materialise the encoded rows in the default number of
  sessions (``encoded_rows``, with the temp buffers for the row map when the plan has one), then
  the optimizer's ``fit_oracle`` on :class:`~service.workers.in_database.InDatabaseGradient` —
  what ``service/workers/runner.py`` does for an in-database dataset;
- **the worker path**: fingerprint + read out and encode (``read_encoded``), then ``fit``.

Both draw from ``SecureRandom.seeded(0)`` (the worker's test mode), so the two releases agree to
summation rounding; the bench reports their largest relative difference. The previous
``gradient`` part times ``dp_agd``'s own default plan (≈ 945 gradients at 10⁶ × 10), which is
not the job ``auto`` runs there (``dp_agd_centred``, 400 gradients).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from typing import Any

import numpy as np

__all__ = ["default_job", "print_default_job"]

ARMS = ("in database", "worker path")


def _default_job(n: int, columns: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """The priced default job on the bench's table (public facts only): its stored spec and
    plan, as the service stores them for the worker."""
    from bench.in_database import TARGET
    from service.domain.submission import DatasetFacts, price_job
    from service.schemas import JobCreate

    facts = DatasetFacts(
        id="bench", n_rows=n, n_features=columns, delta=TARGET.delta,
        label_type="binary", classes=None, retired=False,
    )  # fmt: skip
    body = JobCreate.model_validate(
        {
            "dataset_id": "bench",
            "model": {"type": "logistic_regression"},
            "privacy": {"epsilon": TARGET.epsilon, "delta": TARGET.delta},
        }
    )
    priced = price_job(facts, body)
    return priced.spec, priced.plan_json


def _run_arm(
    url: str, table: str, n: int, columns: int, arm: str, spec: dict[str, Any], plan_json: Any
) -> dict[str, Any]:
    """In this (fresh) process, which imports what a worker does (the stored spec and plan come
    in, as the worker reads them): one whole default job by ``arm``; RSS after the imports and
    the source, the peak (VmHWM), the wall time, the optimizer, T and the released model."""
    from bench.in_database import _status_mib, open_table, reset_peak_rss, schema
    from service.data.reader import read_encoded
    from service.models.registry import build_loss, parse_model_spec
    from service.optimizers.kits.planning import plan_from_json
    from service.optimizers.kits.registry import get_optimizer
    from service.privacy.secure_random import SecureRandom
    from service.workers.in_database import InDatabaseGradient, encoded_rows

    plan = plan_from_json(plan_json)
    loss = build_loss(parse_model_spec(spec["model"]))
    optimizer: Any = get_optimizer(spec["optimizer"]["name"])
    source = open_table(url, table)
    encoder, label = schema(columns)
    d = encoder.dimension
    before = reset_peak_rss()
    rng = SecureRandom.seeded(0)
    start = time.perf_counter()
    if arm == "in database":
        row_map = float(plan.hyperparameters.get("row_map_share") or 0.0) > 0.0
        fingerprint = source.fingerprint()
        with encoded_rows(
            source, encoder, label, None, n=n, fingerprint=fingerprint, row_map=row_map
        ) as conn:
            setup_s = time.perf_counter() - start
            oracle = InDatabaseGradient(conn, loss, n, d)
            w = optimizer.fit_oracle(plan, loss, oracle, rng, lambda t: None)
    else:
        source.fingerprint()
        X, y = read_encoded(source, encoder, label, None)
        setup_s = time.perf_counter() - start
        w = optimizer.fit(plan, loss, X, y, rng, lambda t: None)
    return {
        "arm": arm,
        "optimizer": optimizer.name,
        "steps": int(plan.total_steps),
        "before_mib": before,
        "peak_mib": _status_mib("VmHWM"),
        "setup_s": setup_s,
        "job_s": time.perf_counter() - start,
        "model": [float(v) for v in np.asarray(w).ravel()],
    }


def _in_fresh_process(url: str, table: str, n: int, columns: int, arm: str) -> dict[str, Any]:
    spec, plan_json = _default_job(n, columns)
    code = (
        "import json, sys; from bench.in_database_default_job import _run_arm; "
        "print(json.dumps(_run_arm(*json.loads(sys.argv[1]))))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, json.dumps([url, table, n, columns, arm, spec, plan_json])],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise RuntimeError(f"the default-job probe failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def default_job(url: str, table: str, n: int, columns: int) -> dict[str, Any]:
    """Both arms, each in a fresh interpreter, and the two releases' largest relative
    difference (the same seeded draws: summation rounding only)."""
    arms = [_in_fresh_process(url, table, n, columns, arm) for arm in ARMS]
    db, worker = (np.array(a.pop("model")) for a in arms)
    scale = max(float(np.max(np.abs(worker))), 1e-300)
    return {"arms": arms, "max_relative_difference": float(np.max(np.abs(db - worker)) / scale)}


def print_default_job(results: dict[str, Any], seconds: Any) -> None:
    out = results["default"]
    db, worker = out["arms"]
    print(
        f"\n### the default job ({db['optimizer']}, {db['steps']} steps), whole, "
        f"{results['rows']:,} rows × {results['columns']} columns (fresh process each)\n"
    )
    print("| path | setup | job | peak RSS (MiB) | RSS growth (MiB) |")
    print("|---|---|---|---|---|")
    for a in out["arms"]:
        print(
            f"| {a['arm']} | {seconds(a['setup_s'])} | {seconds(a['job_s'])} "
            f"| {a['peak_mib']:.0f} | {a['peak_mib'] - a['before_mib']:.0f} |"
        )
    print(
        f"| ratio, database / worker | {db['setup_s'] / worker['setup_s']:.2f} "
        f"| {db['job_s'] / worker['job_s']:.2f} | models' max relative difference "
        f"{out['max_relative_difference']:.1e} | |"
    )
    sys.stdout.flush()
