"""Limits on the API (issue 23, item 1): pricing off the API's interpreter, priced once, and
per-principal rate and concurrency limits answered 429 + Retry-After as problem+json.

In-process app on SQLite with settings of the test's own (a low rate, one compute process).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from service.api.app import create_app
from service.api.compute import ComputePool, PriceCache
from service.api.throttle import ComputeLimiter, Limits, TooManyRequests
from service.cli import create_key_cli, migrate
from service.optimizers.kits.base import InfeasibleSpec
from service.settings import Settings
from tests.support.inprocess import QueueOnly, bearer
from tests.support.walkthrough import COPIES, credit_dataset, logistic_job


def _pid() -> int:
    return os.getpid()


def _infeasible() -> None:
    raise InfeasibleSpec("optimizer.params.iterations", "too many")


def test_the_compute_pool_runs_work_in_another_process_and_returns_refusals() -> None:
    pool = ComputePool(1)
    try:
        assert pool.run(_pid) != os.getpid()
        # InfeasibleSpec does not survive pickling as is: it comes back as the same refusal.
        with pytest.raises(InfeasibleSpec) as refused:
            pool.run(_infeasible)
        assert refused.value.field == "optimizer.params.iterations"
    finally:
        pool.close()


def test_the_price_cache_computes_an_identical_key_once_and_stays_bounded() -> None:
    calls: list[int] = []

    def work(x: int) -> dict[str, int]:
        calls.append(x)
        return {"x": x}

    cache, inline = PriceCache(2), ComputePool(0)
    first = cache.get_or_compute(("k", 1), inline, work, 1)
    first["x"] = 99  # callers own their copy: the cached value is untouched
    assert cache.get_or_compute(("k", 1), inline, work, 1) == {"x": 1}
    assert calls == [1]
    cache.get_or_compute(("k", 2), inline, work, 2)
    cache.get_or_compute(("k", 3), inline, work, 3)
    assert len(cache) == 2  # the least recently used key went
    cache.get_or_compute(("k", 1), inline, work, 1)
    assert calls == [1, 2, 3, 1]


def test_a_principal_over_its_concurrency_and_queue_is_refused_at_once() -> None:
    """One running, one waiting (no thread held), the third refused with a Retry-After; the
    waiting one runs when the first ends; another principal is not affected."""

    async def scenario() -> list[str]:
        limiter = ComputeLimiter(Limits(rate=0, concurrency=1, queue=1, wait_seconds=5, slots=4))
        events: list[str] = []
        release = asyncio.Event()

        async def hold(name: str, tag: str) -> None:
            async with limiter.slot(name):
                events.append(f"start {tag}")
                await release.wait()

        first = asyncio.create_task(hold("mallory", "1"))
        await asyncio.sleep(0.01)
        second = asyncio.create_task(hold("mallory", "2"))
        await asyncio.sleep(0.01)
        try:
            async with limiter.slot("mallory"):
                events.append("start 3")
        except TooManyRequests as refused:
            events.append(f"refused retry-after={refused.retry_after}")
        async with limiter.slot("alice"):
            events.append("alice")
        release.set()
        await asyncio.gather(first, second)
        return events

    assert asyncio.run(scenario()) == [
        "start 1",
        "refused retry-after=1",
        "alice",
        "start 2",
    ]


def test_a_wait_past_the_deadline_is_a_429() -> None:
    async def scenario() -> int:
        limiter = ComputeLimiter(Limits(rate=0, concurrency=1, queue=4, wait_seconds=0.1))
        async with limiter.slot("mallory"):
            try:
                async with limiter.slot("mallory"):
                    return -1
            except TooManyRequests as refused:
                return refused.retry_after

    assert asyncio.run(scenario()) >= 1


@pytest.fixture
def limited(tmp_path: Path) -> Iterator[tuple[TestClient, dict[str, str], str]]:
    """An app with a rate of 1 expensive request per 100 s (bursts of 3) per principal and one
    compute process; an owner's dataset granted to analysts ann and bob."""
    url = f"sqlite:///{tmp_path / 'dpfit.db'}"
    migrate(url)
    settings = Settings(
        database_url=url, data_roots=(tmp_path, COPIES), workers=1, dask_scheduler=None
    )
    settings = replace(settings, compute_processes=1, principal_rate=0.01, principal_burst=3)
    keys = {"admin": create_key_cli(url, "admin", "admin")}
    with TestClient(create_app(settings, QueueOnly), raise_server_exceptions=False) as client:
        for name, role in (("owner", "owner"), ("ann", "analyst"), ("bob", "analyst")):
            made = client.post(
                "/v1/keys", json={"name": name, "role": role}, headers=bearer(keys["admin"])
            )
            keys[name] = made.json()["key"]
        owner = bearer(keys["owner"])
        dataset = client.post("/v1/datasets", json=credit_dataset(), headers=owner).json()["id"]
        for analyst in ("ann", "bob"):
            client.post(
                f"/v1/datasets/{dataset}/grants", json={"principal": analyst}, headers=owner
            )
        yield client, keys, dataset


def _estimate(client: TestClient, key: str, body: dict[str, Any]) -> Any:
    return client.post("/v1/jobs/estimate", json=body, headers=bearer(key))


def test_identical_estimates_are_priced_once(
    limited: tuple[TestClient, dict[str, str], str],
) -> None:
    client, keys, dataset = limited
    body = logistic_job(dataset, epsilon=0.5)
    first, second = _estimate(client, keys["ann"], body), _estimate(client, keys["bob"], body)
    assert first.status_code == second.status_code == 200, first.text
    assert first.json()["plan"] == second.json()["plan"]
    cache = client.app.state.price_cache  # type: ignore[attr-defined]
    assert (cache.misses, cache.hits) == (1, 1)


def test_over_the_rate_is_429_with_retry_after_and_others_are_served(
    limited: tuple[TestClient, dict[str, str], str],
) -> None:
    client, keys, dataset = limited
    body = logistic_job(dataset, epsilon=0.5)
    answers = [_estimate(client, keys["ann"], body) for _ in range(4)]
    assert [a.status_code for a in answers] == [200, 200, 200, 429]
    refused = answers[-1]
    assert refused.headers["content-type"] == "application/problem+json"
    assert refused.json()["status"] == 429
    assert int(refused.headers["Retry-After"]) >= 1
    # Submissions share the principal's bucket; another principal has its own.
    assert client.post("/v1/jobs", json=body, headers=bearer(keys["ann"])).status_code == 429
    assert _estimate(client, keys["bob"], body).status_code == 200
    # Reads are never throttled.
    read = client.get(f"/v1/datasets/{dataset}/budget", headers=bearer(keys["ann"]))
    assert read.status_code == 200


def test_an_infeasible_spec_priced_in_a_process_still_names_its_field(
    limited: tuple[TestClient, dict[str, str], str],
) -> None:
    client, keys, dataset = limited
    body = logistic_job(dataset, epsilon=0.5)
    body["optimizer"] = {"name": "auto", "params": {"iterations": 5}}  # planning refuses it
    refused = _estimate(client, keys["ann"], body)
    assert refused.status_code == 422, refused.text
    assert refused.json()["field"] == "optimizer.params"


def test_the_limits_are_read_from_the_environment_and_checked(tmp_path: Path) -> None:
    from service.settings import SettingsError

    base = {"DPFIT_DATABASE_URL": f"sqlite:///{tmp_path / 'x.db'}"}
    defaults = Settings.from_env(base)
    assert (defaults.principal_rate, defaults.principal_concurrency) == (50.0, 2)
    assert (defaults.max_connections, defaults.header_timeout_seconds) == (512, 15.0)
    tuned = Settings.from_env(
        {**base, "DPFIT_PRINCIPAL_RATE": "0.5", "DPFIT_COMPUTE_PROCESSES": "0"}
    )
    assert (tuned.principal_rate, tuned.compute_processes) == (0.5, 0)
    for name, value in (
        ("DPFIT_PRINCIPAL_RATE", "fast"),
        ("DPFIT_PRINCIPAL_CONCURRENCY", "0"),
        ("DPFIT_HEADER_TIMEOUT_SECONDS", "inf"),
    ):
        with pytest.raises(SettingsError, match=name):
            Settings.from_env({**base, name: value})
