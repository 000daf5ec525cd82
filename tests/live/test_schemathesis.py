"""A bounded schemathesis pass (issue 9): no input makes the service answer 5xx or break its own
contract.

Against the live servers (SQLite and PostgreSQL), every operation of the served OpenAPI document
gets generated requests — valid ones (positive) and invalid ones (negative) — sent with an
admin's, an owning owner's or a granted analyst's key. A registered dataset, a finished job and
its model exist, and path parameters name them half of the time, so the calls reach past the
404s. Checks: no 5xx, the status code is declared, the content type and the body match the
declared response schema. EXAMPLES cases per operation and mode on each backend (the test prints
the count it sent).
"""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)

from tests.support.live import LiveServer
from tests.support.walkthrough import credit_dataset, logistic_job

EXAMPLES = 50
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]
# Cases sent per backend, for the report (pytest -s shows them).
SENT: Counter[str] = Counter()


def existing_things(server: LiveServer) -> tuple[dict[str, str], dict[str, str]]:
    """Keys of three roles and ids that exist: a dataset, a finished job, its model."""
    tag = f"{time.monotonic_ns() % 10**8}"
    keys = {
        "admin": server.key("admin", "admin"),
        "owner": server.key(f"st-owner-{tag}", "owner"),
        "analyst": server.key(f"st-analyst-{tag}", "analyst"),
    }
    owner = server.client(keys["owner"])
    analyst = server.client(keys["analyst"])
    created = owner.post("/v1/datasets", json=credit_dataset(epsilon=5.0))
    assert created.status_code == 201, created.text
    dataset = created.json()
    owner.post(f"/v1/datasets/{dataset['id']}/grants", json={"principal": f"st-analyst-{tag}"})
    job = analyst.post("/v1/jobs", json=logistic_job(dataset["id"], epsilon=0.5)).json()
    deadline = time.monotonic() + 300
    while job["status"] not in ("succeeded", "failed") and time.monotonic() < deadline:
        time.sleep(0.2)
        job = analyst.get(f"/v1/jobs/{job['id']}").json()
    assert job["status"] == "succeeded", job
    ids = {
        "dataset_id": dataset["id"],
        "job_id": job["id"],
        "model_id": job["model_id"],
        "key_id": "key_none",
    }
    return keys, ids


def test_no_input_breaks_the_contract(server: LiveServer) -> None:
    keys, ids = existing_things(server)
    document = httpx.get(f"{server.base_url}/openapi.json").json()
    schema = schemathesis.openapi.from_dict(document)
    failures: list[str] = []
    backend = "postgres" if server.database_url.startswith("postgresql") else "sqlite"
    for result in schema.get_all_operations():
        operation = result.ok()
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            strategy = st.tuples(
                operation.as_strategy(generation_mode=mode),
                st.sampled_from(sorted(keys)),
                st.booleans(),
            )

            @settings(
                max_examples=EXAMPLES,
                deadline=None,
                database=None,
                derandomize=True,
                phases=[Phase.explicit, Phase.generate],
                suppress_health_check=list(HealthCheck),
            )
            @given(strategy)
            def run(drawn: tuple[Any, str, bool]) -> None:
                case, role, real_ids = drawn
                if real_ids and case.path_parameters:
                    for name in case.path_parameters:
                        if name in ids:
                            case.path_parameters[name] = ids[name]
                headers = dict(case.headers or {})
                headers["Authorization"] = f"Bearer {keys[role]}"
                SENT[backend] += 1
                try:
                    case.call_and_validate(
                        base_url=server.base_url, headers=headers, checks=CHECKS, timeout=60
                    )
                except (Exception, BaseExceptionGroup) as exc:  # noqa: BLE001 - reported together
                    failures.append(f"{case.operation.label} [{role}]: {str(exc)[:600]}")
                    raise

            before = len(failures)
            try:
                run()
            except Unsatisfiable:  # no parameter to make invalid (e.g. GET /healthz, negative)
                continue
            except (Exception, BaseExceptionGroup) as exc:  # noqa: BLE001 - one per operation
                if len(failures) == before:  # not a check: the pass itself broke
                    failures.append(f"{operation.label} ({mode.value}): {exc!r}"[:600])
    print(f"\nschemathesis on {backend}: {SENT[backend]} cases")
    assert not failures, "\n\n".join(failures[:10])
    assert SENT[backend] >= 1000


@pytest.fixture(autouse=True)
def _after(server: LiveServer) -> Any:
    yield
    # The service is still healthy after the pass.
    assert httpx.get(f"{server.base_url}/healthz").status_code == 200
