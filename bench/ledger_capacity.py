"""Ledger capacity: how many jobs a budget admits, measured through the API.

Budget (ε_B, δ_B) = (3, 1e-5) on a 2,000-row copy of the example data (+1 row per workload);
jobs of (0.5, 1e-6)
(pure workloads: (0.5, 0) on a (3, 0) budget) are POSTed one by one until the first 409, on an
in-process app (real routes, real SQLite, a dispatcher that runs nothing, so nothing but the
ledger is measured). Also prints ``epsilon_spent`` after the first job of each workload and the
count exact Gaussian composition allows. Measurements, not tests.

    .venv/bin/python -m bench.ledger_capacity
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import tempfile
from pathlib import Path
from typing import Any

from service.privacy.gdp import gdp_delta, gdp_mu
from tests.support.inprocess import bearer, in_process_app
from tests.support.walkthrough import credit_dataset, logistic_job, write_large_credit

WORKLOADS: dict[str, list[str]] = {
    "output_perturbation_gd": ["output_perturbation_gd"],
    "dp_gd": ["dp_gd"],
    "noisy_sgd_bst14": ["noisy_sgd_bst14"],
    "alternating noisy_sgd_bst14 / output_perturbation_gd": [
        "noisy_sgd_bst14",
        "output_perturbation_gd",
    ],
    "pure output_perturbation_gd on (3, 0)": ["pure"],
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--out", type=Path, default=None, help="write the table as JSON")


def job_body(dataset_id: str, name: str) -> dict[str, Any]:
    if name == "pure":
        return logistic_job(dataset_id, epsilon=0.5, delta=0.0)
    body = logistic_job(dataset_id, epsilon=0.5, delta=1e-6)
    body["optimizer"] = {"name": name, "params": {}}
    return body


def exact_gaussian_count(epsilon: float, delta: float, job_epsilon: float, job_delta: float) -> int:
    mu = gdp_mu(job_epsilon, job_delta)
    k = 0
    while gdp_delta(epsilon, math.sqrt(k + 1) * mu) <= delta:
        k += 1
    return k


def run(rows: int) -> dict[str, dict[str, Any]]:
    results: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        data = root / "data"
        data.mkdir()
        with in_process_app(f"sqlite:///{root / 'dpfit.db'}", data) as (client, admin):
            owner = client.post(
                "/v1/keys", json={"name": "owner", "role": "owner"}, headers=bearer(admin)
            ).json()["key"]
            for index, (label, names) in enumerate(WORKLOADS.items()):
                # one budget per data: each workload gets its own file (n = rows + index)
                source = write_large_credit(data, rows + index)
                body = credit_dataset(
                    epsilon=3.0, delta=0.0 if names == ["pure"] else 1e-5, uri=source
                )
                registered = client.post("/v1/datasets", json=body, headers=bearer(owner))
                assert registered.status_code == 201, registered.text
                dataset_id = registered.json()["id"]
                admitted, first_spent = 0, None
                for name in itertools.cycle(names):
                    answer = client.post(
                        "/v1/jobs", json=job_body(dataset_id, name), headers=bearer(owner)
                    )
                    if answer.status_code != 202:
                        assert answer.status_code == 409, answer.text
                        break
                    admitted += 1
                    if first_spent is None:
                        first_spent = client.get(
                            f"/v1/datasets/{dataset_id}/budget", headers=bearer(owner)
                        ).json()["epsilon_spent"]
                results[label] = {"admitted": admitted, "first_epsilon_spent": first_spent}
                print(f"{label:55s} admitted {admitted:3d}  first ε_spent {first_spent:.4f}")
    exact = exact_gaussian_count(3.0, 1e-5, 0.5, 1e-6)
    results["exact Gaussian composition"] = {"admitted": exact}
    print(f"{'exact Gaussian composition (0.5, 1e-6) jobs':55s} allows   {exact:3d}")
    return results


def main(args: argparse.Namespace) -> None:
    results = run(args.rows)
    if args.out is not None:
        args.out.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    add_arguments(parser)
    main(parser.parse_args())
