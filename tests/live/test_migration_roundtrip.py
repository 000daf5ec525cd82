"""Every migration goes down and up again on a database holding data — datasets, grants, jobs,
charges — on SQLite and PostgreSQL (a downgrade that only works on an empty schema is not a
downgrade an operator can use)."""

from __future__ import annotations

from pathlib import Path

import pytest
from alembic.config import Config
from sqlalchemy import func, select

from alembic import command
from service.cli import ROOT, migrate
from service.db.models import Charge, Dataset, Grant, Job
from service.db.session import make_engine, session_factory
from service.ledger import totals
from service.ledger.audit import audit
from tests.support.inprocess import bearer, in_process_app
from tests.support.walkthrough import credit_dataset, logistic_job


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_every_migration_downgrades_and_upgrades_with_data(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    if backend == "postgres":
        url = str(request.getfixturevalue("private_postgres_database"))
    else:
        url = f"sqlite:///{tmp_path / 'dpfit.db'}"
    with in_process_app(url, tmp_path) as (client, admin_key):
        admin = bearer(admin_key)
        owner = bearer(
            client.post("/v1/keys", json={"name": "o", "role": "owner"}, headers=admin).json()[
                "key"
            ]
        )
        analyst = bearer(
            client.post("/v1/keys", json={"name": "a", "role": "analyst"}, headers=admin).json()[
                "key"
            ]
        )
        dataset_id = client.post("/v1/datasets", json=credit_dataset(), headers=owner).json()["id"]
        client.post(f"/v1/datasets/{dataset_id}/grants", json={"principal": "a"}, headers=owner)
        job = client.post("/v1/jobs", json=logistic_job(dataset_id, epsilon=0.1), headers=analyst)
        assert job.status_code == 202, job.text

    config = Config(str(ROOT / "alembic.ini"))
    config.set_main_option("script_location", str(ROOT / "alembic"))
    config.attributes["url"] = url
    command.downgrade(config, "0001")
    command.upgrade(config, "head")
    migrate(url)  # idempotent at head

    engine = make_engine(url)
    with session_factory(engine)() as session:
        assert session.scalar(select(func.count()).select_from(Job)) == 1
        assert session.scalar(select(func.count()).select_from(Grant)) == 1
        assert session.scalar(select(func.count()).select_from(Charge)) == 1
        # Revision 0010 rebuilt the running totals from the rows: equal to them, both scopes.
        dataset = session.get(Dataset, dataset_id)
        assert dataset is not None
        assert audit(session, dataset).consistent
        assert totals.read(session, dataset_id).charges == 1
        assert totals.read(session, dataset_id, "a").charges == 1  # (its μ went with 0006's down)
    engine.dispose()
