"""SQLAlchemy 2.0 typed ORM models. Alembic owns the schema (alembic/versions)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from sqlalchemy.types import TypeDecorator


def utcnow() -> datetime:
    return datetime.now(UTC)


class UTCDateTime(TypeDecorator[datetime]):
    """A timezone-aware UTC timestamp on every backend (SQLite stores no offset)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is not None and value.tzinfo is None:
            raise ValueError("naive datetime")
        return value.astimezone(UTC) if value is not None else None

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


class Base(DeclarativeBase):
    type_annotation_map = {dict[str, Any]: JSON, list[Any]: JSON}


class Principal(Base):
    """Who acts: one permanent, unique ``name`` and one ``role`` (admin, owner or analyst).

    Datasets, grants, jobs, charges and models name their principal by ``name``; a name is never
    deleted nor given to another principal, so revoking keys never moves ownership.
    """

    __tablename__ = "principals"

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    role: Mapped[str] = mapped_column(String(16))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class ApiKey(Base):
    """An API key of one principal (several for rotation): only its SHA-256 is stored."""

    __tablename__ = "api_keys"

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    principal_id: Mapped[str] = mapped_column(ForeignKey("principals.id"), index=True)
    key_hash: Mapped[str] = mapped_column(String(64), unique=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    revoked_at: Mapped[datetime | None] = mapped_column(UTCDateTime)


class Dataset(Base):
    """A dataset registered by reference, with its public schema and total budget (what it
    has spent is in :class:`LedgerTotal`)."""

    __tablename__ = "datasets"

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    name: Mapped[str] = mapped_column(String(200))
    owner: Mapped[str] = mapped_column(String(200), index=True)
    source_uri: Mapped[str] = mapped_column(Text)
    source_path: Mapped[str] = mapped_column(Text)
    source_format: Mapped[str] = mapped_column(String(16))
    fingerprint: Mapped[str] = mapped_column(String(80))
    label: Mapped[dict[str, Any]] = mapped_column(JSON)
    features: Mapped[list[Any]] = mapped_column(JSON)
    n_rows: Mapped[int] = mapped_column(Integer)
    n_features: Mapped[int] = mapped_column(Integer)
    epsilon: Mapped[float] = mapped_column(Float)
    delta: Mapped[float] = mapped_column(Float)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    # The owner's validation report from registration (service.data.reader.ValidationReport
    # JSON); shown to the owner and admins only. NULL for datasets registered before it existed.
    validation: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    # A Parquet folder's per-file fingerprints (file name → "sha256:…"), fixed at registration
    # with ``fingerprint``: a data-parallel worker checks only the files it reads.
    file_fingerprints: Mapped[dict[str, str] | None] = mapped_column(JSON, nullable=True)
    # Set once by an admin (POST /v1/datasets/{id}/retire): no job is admitted afterwards.
    retired_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    # "workers" (the workers read the rows) or "in_database" (a PostgreSQL table whose rows
    # never leave its database: service/workers/in_database.py). Fixed at registration.
    execution: Mapped[str] = mapped_column(String(16), default="workers", server_default="workers")


class SourceClaim(Base):
    """One budget per data: a claim on a source's location or content, held by one dataset.

    ``key`` is ``"location:<sha256 of the canonical location>"`` — global: a path, an object
    key or a table backs one dataset, whoever registers it — or, for content,
    ``"owned:<sha256 of the owner and the content key>"``: scoped to the dataset's owner, so
    the primary key makes one owner's second registration of the same content impossible (also
    under concurrent registrations) while another owner's registration of those bytes learns
    nothing (alembic revision 0013). ``content`` holds the unscoped content key
    (``"content:<sha256 of the fingerprint>"``; NULL on location claims): admins see the
    datasets of different owners that share it. Claims are never deleted while their dataset
    exists (a retired dataset keeps them); withdrawing a dataset that was never charged
    releases them.
    """

    __tablename__ = "source_claims"

    key: Mapped[str] = mapped_column(String(80), primary_key=True)
    dataset_id: Mapped[str] = mapped_column(ForeignKey("datasets.id"), index=True)
    content: Mapped[str | None] = mapped_column(String(80), index=True, nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class DatasetWithdrawal(Base):
    """A dataset its owner (or an admin) withdrew before anything was charged on it (``DELETE
    /v1/datasets/{id}``): the dataset row, its grants and its claims are gone; this record of
    what it was, who withdrew it and when stays, for admins (alembic revision 0013)."""

    __tablename__ = "dataset_withdrawals"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    dataset_id: Mapped[str] = mapped_column(String(40))
    name: Mapped[str] = mapped_column(String(200))
    owner: Mapped[str] = mapped_column(String(200), index=True)
    source_uri: Mapped[str] = mapped_column(Text)
    source_path: Mapped[str] = mapped_column(Text)
    fingerprint: Mapped[str] = mapped_column(String(80))
    n_rows: Mapped[int] = mapped_column(Integer)
    epsilon: Mapped[float] = mapped_column(Float)
    delta: Mapped[float] = mapped_column(Float)
    registered_at: Mapped[datetime] = mapped_column(UTCDateTime)
    withdrawn_by: Mapped[str] = mapped_column(String(200))
    withdrawn_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class Grant(Base):
    """An owner's grant of one dataset to one principal (an API key name).

    ``epsilon_cap`` (optional) caps what this principal's jobs may spend of the dataset's budget:
    their charges alone must pass the same filter with budget (epsilon_cap, δ_B).
    """

    __tablename__ = "grants"
    __table_args__ = (UniqueConstraint("dataset_id", "principal"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    dataset_id: Mapped[str] = mapped_column(ForeignKey("datasets.id"), index=True)
    principal: Mapped[str] = mapped_column(String(200))
    epsilon_cap: Mapped[float | None] = mapped_column(Float)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class Job(Base):
    """A training job. The database is the source of truth for its state.

    ``attempt`` is bumped by every dispatch; a worker only acts while the row still carries the
    attempt it was given, so a stale worker can never overwrite a newer one. ``runs`` counts the
    dispatches a worker actually started (claimed): the retry limit bounds runs.
    ``data_read_at`` is set in the same transaction that moves the job to ``running`` and before
    any row is read: refunds are possible only while it is NULL.
    """

    __tablename__ = "jobs"
    __table_args__ = (
        UniqueConstraint("principal", "idempotency_key"),
        # The job list's keyset pages (GET /v1/jobs): one principal's, and an admin's (all).
        Index("ix_jobs_principal_created", "principal", "created_at", "id"),
        Index("ix_jobs_created", "created_at", "id"),
    )

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    dataset_id: Mapped[str] = mapped_column(ForeignKey("datasets.id"), index=True)
    principal: Mapped[str] = mapped_column(String(200), index=True)
    spec: Mapped[dict[str, Any]] = mapped_column(JSON)
    plan: Mapped[dict[str, Any]] = mapped_column(JSON)
    status: Mapped[str] = mapped_column(String(16), index=True)
    progress_step: Mapped[int] = mapped_column(Integer, default=0)
    progress_total: Mapped[int] = mapped_column(Integer)
    attempt: Mapped[int] = mapped_column(Integer, default=0)
    runs: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    cancel_requested: Mapped[bool] = mapped_column(Boolean, default=False)
    data_read_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    error: Mapped[str | None] = mapped_column(Text)
    model_id: Mapped[str | None] = mapped_column(String(40))
    idempotency_key: Mapped[str | None] = mapped_column(String(200))
    request_hash: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    started_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime)


class Charge(Base):
    """One append-only ledger row: a job's charge, or the refund that cancels it.

    ``rdp`` is the job's RDP curve on the ledger's fixed orders (None stands for +inf);
    ``pure_epsilon`` is set for pure ε-DP jobs (basic composition on δ_B = 0 datasets);
    ``gdp_mu`` is the exact μ of a Gaussian-family job (ledger/filter.py; NULL: Rényi only).
    """

    __tablename__ = "charges"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    dataset_id: Mapped[str] = mapped_column(ForeignKey("datasets.id"), index=True)
    job_id: Mapped[str] = mapped_column(ForeignKey("jobs.id"), index=True)
    principal: Mapped[str] = mapped_column(String(200))
    kind: Mapped[str] = mapped_column(String(8))
    epsilon: Mapped[float] = mapped_column(Float)
    delta: Mapped[float] = mapped_column(Float)
    rdp: Mapped[list[Any]] = mapped_column(JSON)
    pure_epsilon: Mapped[float | None] = mapped_column(Float)
    gdp_mu: Mapped[float | None] = mapped_column(Float, nullable=True)
    event: Mapped[dict[str, Any]] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class LedgerTotal(Base):
    """The running sum of a dataset's standing charges: the whole dataset's (``scope`` = "") and
    each principal's (``scope`` = the principal's name). Written only in the transactions that
    write the charges, under the dataset's lock (service/ledger/totals.py), and always equal to
    the standing charges summed again in ledger order — the audit checks it.

    ``rdp`` holds None for +∞; ``mu_squared`` is Σμ² and ``all_gaussian`` whether every standing
    charge has a μ; ``charges`` counts the standing charges.
    """

    __tablename__ = "ledger_totals"

    dataset_id: Mapped[str] = mapped_column(ForeignKey("datasets.id"), primary_key=True)
    scope: Mapped[str] = mapped_column(String(200), primary_key=True)
    rdp: Mapped[list[Any]] = mapped_column(JSON)
    mu_squared: Mapped[float] = mapped_column(Float)
    all_gaussian: Mapped[bool] = mapped_column(Boolean)
    pure_epsilon: Mapped[float] = mapped_column(Float)
    charges: Mapped[int] = mapped_column(Integer)


class TrainedModel(Base):
    """A released (noised) model. ``job_id`` is unique: a job's model is stored once.

    ``coefficients`` is a vector, or one row per class for a one-vs-rest model, and
    ``intercept`` correspondingly a number or a list (or null without an intercept).
    """

    __tablename__ = "models"

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    job_id: Mapped[str] = mapped_column(ForeignKey("jobs.id"), unique=True)
    dataset_id: Mapped[str] = mapped_column(ForeignKey("datasets.id"), index=True)
    principal: Mapped[str] = mapped_column(String(200), index=True)
    model_spec: Mapped[dict[str, Any]] = mapped_column(JSON)
    coefficients: Mapped[list[Any]] = mapped_column(JSON)
    intercept: Mapped[Any] = mapped_column(JSON, nullable=True)
    feature_names: Mapped[list[Any]] = mapped_column(JSON)
    encoder: Mapped[dict[str, Any]] = mapped_column(JSON)
    label: Mapped[dict[str, Any]] = mapped_column(JSON)
    privacy: Mapped[dict[str, Any]] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class Evaluation(Base):
    """The released (noised) metrics of a private evaluation job; ``job_id`` is unique: an
    evaluation's result is stored once. ``metrics`` holds noised values only."""

    __tablename__ = "evaluations"
    __table_args__ = (UniqueConstraint("job_id", name="uq_evaluations_job_id"),)

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    job_id: Mapped[str] = mapped_column(ForeignKey("jobs.id"))
    model_id: Mapped[str] = mapped_column(ForeignKey("models.id"), index=True)
    dataset_id: Mapped[str] = mapped_column(ForeignKey("datasets.id"))
    principal: Mapped[str] = mapped_column(String(200))
    metrics: Mapped[dict[str, Any]] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
