r"""Bolt-on private permutation SGD run *inside* PostgreSQL, as paper 004 built it.

Wu, Li, Kumar, Chaudhuri, Jha & Naughton (SIGMOD 2017, §5) integrate bolt-on private SGD into
Bismarck (Feng, Kumar, Recht & Ré, SIGMOD 2012): SGD is a user-defined aggregate whose state is
the model, one aggregate call is one pass (epoch) over the table in a shuffled order, and the
noise is added once, to the result — the SGD itself is untouched, which is why the paper
measures no runtime overhead over noiseless in-database SGD.

Here the aggregate is plain PL/pgSQL, created for the session in ``pg_temp`` (no extension,
nothing installed; the role needs only SELECT on the table and TEMP on the database) and
dropped on the way out. It reproduces, step for step, the noise-free black box of
:func:`service.optimizers.bolt_on_psgd.permutation_sgd`
(:func:`~service.optimizers.kits.sgd_common.run_sgd` over
:func:`~service.optimizers.kits.sgd_common.permutation_batches`) for the logistic loss:

- pass p = 1 … k: the pass's order is π_p = ``rng.permutation(n)`` — the same draws in the
  same order as the worker path — but the worker never holds it. :meth:`SecureRandom.
  permutation` is the argsort of n uniform 64-bit keys u_0 … u_{n−1} (the next n words of the
  job's generator; redrawn, all n, when two are equal), so the worker streams the keys into the
  session in chunks of 2¹⁶ as the temporary table ``pg_temp.dpfit_order(pos, key)`` (binary
  COPY; ``pos`` = i, the row's index in the source's stable order; ``key`` = u_i with its top
  bit flipped, which orders the signed ``bigint`` keys as the unsigned words), asks the
  database whether two keys are equal (then it truncates and redraws, as the worker path
  does), and the pass visits the rows in key order — π_p exactly, an exact uniform
  permutation with no computational assumption. The worker holds one chunk (1.6 MiB) at a
  time: its memory is flat in n (the worker path's argsort holds ≈ 40 bytes a row). One
  aggregate query ``SELECT dpfit_sgd_pass(ARRAY[x0 … x_{d−1}], y, … ORDER BY key) FROM
  dpfit_order JOIN dpfit_rows USING (pos)`` is the pass; only the state (the d-sized
  iterate, the running average and the step counter) leaves the database;
- the pass's batches are the consecutive blocks of π_p that ``np.array_split(π_p, m)`` cuts,
  m = ⌊n/b⌋ (:func:`~service.optimizers.kits.sgd_common.pass_layout`): with n = qm + r, the first r
  batches hold q + 1 rows, the others q. The transition function accumulates the per-row
  gradients of one batch at the batch's starting iterate, g = Σ_{i∈B} c_i x_i with
  c_i = y_i·min(σ(−y_i w·x_i), C) written with :meth:`LogisticLoss.gradient`'s operations
  (σ(t) = (1 + tanh(t/2))/2), and at the batch's last row takes step t:

      ∇ = g·(−1/|B|) + μw (+ z_t),   w ← Π_R(w − η_t ∇),   w̄ ← w̄ + (w − w̄)/t,

  η_t the plan's schedule (η₀ for t ≤ t₀, 1/(μt) after), Π_R the projection of
  :func:`~service.optimizers.kits.sgd_common.project_to_ball` (same operations), w̄ the running
  average when the plan averages. z_t is only for the per-step-noise comparison of the bench
  (drawn by the worker, shipped as ``pg_temp.dpfit_noise``); bolt-on passes none;
- then the worker adds the release noise with the optimizer's own
  :func:`~service.privacy.output_perturbation.release_with_noise` and ``rng`` — exactly
  what :meth:`BoltOnPSGD.fit` does after ``permutation_sgd``.

So for the same generator state the in-database and worker paths release the same model up to
floating-point summation order (the margins and batch sums are added in another order than
BLAS's; tests/live/test_in_database_sgd.py holds them to 1e-9 relative).

Privacy. The permutations are data-independent and stay in the session (never stored or
released; the keys are random words, not rows, and the tie check depends on them alone); the
sensitivity analysis of :mod:`service.optimizers.bolt_on_psgd` holds for every fixed
permutation sequence, so it holds here unchanged, and the plan's checks are those of ``fit``
(:func:`checked_run`). The rows are the encoded rows of
:func:`~service.workers.in_database.encoded_rows`: ‖x‖ ≤ 1 and y = ±1 by construction of the
encoding compiled to SQL — for one-vs-rest over a categorical label (``label_class`` = k:
the rows hold the class index) the pass reads y = ``CASE WHEN y = k THEN 1 ELSE −1 END``,
``encode_one_vs_rest``'s row k, and the runner fits the K classes in order with the class plan
and one generator, as the worker path does. The work per pass is the same for every table of
the same public n, d (a fixed number of rows and steps); errors from the database are replaced
by a generic message.

Floating point inside PostgreSQL. ``float8`` ``*`` and ``/`` raise when a non-zero product
underflows to 0, where numpy returns 0: a data-dependent failure the service must not have.
The values are kept away from it: encoded entries are 0 or ≥ 2⁻⁸⁰ in magnitude (the map onto
[−1, 1] subtracts 1, so its non-zero results are ≥ 2⁻⁵³, times 1/√k and the norm guard);
σ-coefficients are 0 or ≥ 2⁻⁵⁴ (1 + tanh is a multiple of 2⁻⁵³), clipped at C; the public
constants η_t, μ, C, R must be ≥ 2⁻²⁰⁰ (:data:`SMALLEST_CONSTANT`, checked from the plan:
refusing depends on public values only); and after every step the iterate and the average
are flushed to 0 wherever their magnitude is below 2⁻⁴⁰⁰ (:data:`FLUSH`). Every product then
stays above 2⁻¹⁰⁵⁰, where IEEE arithmetic is exact-rounded and PostgreSQL raises nothing; the
flush moves the result by less than 2⁻⁴⁰⁰ per entry against numpy's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np
import psycopg
import sqlalchemy as sa
from sqlalchemy.engine import Connection
from sqlalchemy.exc import SQLAlchemyError

from service.data.sources import SourceError
from service.data.sql_encoding import InDatabaseUnsupported
from service.models.base import FloatArray, Loss
from service.models.logistic import LogisticLoss
from service.optimizers.bolt_on_psgd import BoltOnConfig, checked_plan
from service.optimizers.kits.base import ProgressCallback, ReleasePlan
from service.optimizers.kits.sgd_common import (
    InverseSqrtSchedule,
    StepSchedule,
    pass_layout,
)
from service.privacy.output_perturbation import release_with_noise
from service.privacy.secure_random import SecureRandom, as_secure

__all__ = [
    "FLUSH",
    "SMALLEST_CONSTANT",
    "BoltOnRun",
    "checked_run",
    "fit_bolt_on_in_database",
    "in_database_permutation_sgd",
    "pass_timeout_ms",
]

#: Iterate and average entries below this magnitude are set to 0 after every step (see the
#: module docstring: keeps every product inside PostgreSQL clear of its underflow error).
FLUSH = 2.0**-400
#: The smallest step size, l2, gradient clip and radius the in-database SGD runs with.
SMALLEST_CONSTANT = 2.0**-200

_ROWS = "pg_temp.dpfit_rows"
_ORDER = "dpfit_order"
_NOISE = "dpfit_noise"
_STEP = "pg_temp.dpfit_sgd_row"
_PASS = "pg_temp.dpfit_sgd_pass"
_FAILED = "the in-database job could not run its passes"
_COPY_CHUNK = 1 << 16

# The transition function. State (1-based): w = s[1..d], w̄ = s[d+1..2d], the batch's gradient
# sum g = s[2d+1..3d], then t (steps so far), k (rows of the current batch seen), b (batches
# of this pass done). ``init`` = w, w̄, t from the previous pass; ``cfg`` = d, q, r, η₀ (or c),
# μ, t₀ (−1: constant step), R (0: none), averaging (0/1), C (0: none), flush, and 1 for the
# schedule η_t = c/√t (InverseSqrtSchedule, the per-step-noise baselines' convex mode) else 0.
_STEP_SQL = f"""
CREATE OR REPLACE FUNCTION {_STEP}(
    s double precision[], x double precision[], y double precision, z double precision[],
    init double precision[], cfg double precision[]
) RETURNS double precision[]
LANGUAGE plpgsql IMMUTABLE AS $fn$
DECLARE
    d integer := cfg[1]::integer;
    margin double precision := 0.0;
    c double precision;
    j integer;
    k integer;
    b integer;
    size integer;
    t double precision;
    eta double precision;
    inv double precision;
    l2 double precision := cfg[5];
    flush double precision := cfg[10];
    grad double precision;
    largest double precision;
    squares double precision;
    scaled double precision;
    norm double precision;
    factor double precision;
BEGIN
    IF s IS NULL THEN
        s := init[1:2 * d] || array_fill(0.0::double precision, ARRAY[d])
            || ARRAY[init[2 * d + 1], 0.0, 0.0]::double precision[];
    END IF;
    FOR j IN 1..d LOOP
        margin := margin + x[j] * s[j];
    END LOOP;
    c := (1.0::double precision + tanh(margin * y * (-0.5)::double precision))
        * 0.5::double precision;
    IF cfg[9] > 0.0 THEN
        c := least(c, cfg[9]);
    END IF;
    c := c * y;
    FOR j IN 1..d LOOP
        s[2 * d + j] := s[2 * d + j] + c * x[j];
    END LOOP;
    k := s[3 * d + 2]::integer + 1;
    b := s[3 * d + 3]::integer;
    size := cfg[2]::integer + CASE WHEN b < cfg[3] THEN 1 ELSE 0 END;
    IF k < size THEN
        s[3 * d + 2] := k;
        RETURN s;
    END IF;
    -- the batch is complete: step t
    t := s[3 * d + 1] + 1.0;
    IF cfg[11] > 0.0 THEN
        eta := cfg[4] / sqrt(t);
    ELSIF cfg[6] < 0.0 OR t <= cfg[6] THEN
        eta := cfg[4];
    ELSE
        eta := 1.0::double precision / (l2 * t);
    END IF;
    inv := (-1.0)::double precision / size::double precision;
    largest := 0.0;
    FOR j IN 1..d LOOP
        grad := s[2 * d + j] * inv;
        IF l2 <> 0.0 THEN
            grad := grad + l2 * s[j];
        END IF;
        IF z IS NOT NULL THEN
            grad := grad + z[j];
        END IF;
        s[j] := s[j] - eta * grad;
        IF abs(s[j]) < flush THEN
            s[j] := 0.0;
        END IF;
        largest := greatest(largest, abs(s[j]));
        s[2 * d + j] := 0.0;
    END LOOP;
    IF cfg[7] > 0.0 AND largest > 0.0 THEN
        squares := 0.0;
        FOR j IN 1..d LOOP
            scaled := s[j] / largest;
            squares := squares + scaled * scaled;
        END LOOP;
        norm := largest * sqrt(squares);
        IF norm > cfg[7] THEN
            factor := cfg[7] / norm;
            FOR j IN 1..d LOOP
                s[j] := s[j] * factor;
            END LOOP;
        END IF;
    END IF;
    IF cfg[8] > 0.0 THEN
        FOR j IN 1..d LOOP
            s[d + j] := s[d + j] + (s[j] - s[d + j]) / t;
            IF abs(s[d + j]) < flush THEN
                s[d + j] := 0.0;
            END IF;
        END LOOP;
    END IF;
    s[3 * d + 1] := t;
    s[3 * d + 2] := 0.0;
    s[3 * d + 3] := b + 1;
    RETURN s;
END
$fn$;
"""

_PASS_SQL = f"""
CREATE AGGREGATE {_PASS}(
    double precision[], double precision, double precision[], double precision[],
    double precision[]
) (SFUNC = {_STEP}, STYPE = double precision[]);
"""

_DROP_SQL = [
    f"DROP AGGREGATE IF EXISTS {_PASS}(double precision[], double precision, "
    "double precision[], double precision[], double precision[])",
    f"DROP FUNCTION IF EXISTS {_STEP}(double precision[], double precision[], double precision, "
    "double precision[], double precision[], double precision[])",
    f"DROP TABLE IF EXISTS pg_temp.{_ORDER}",
    f"DROP TABLE IF EXISTS pg_temp.{_NOISE}",
]


def pass_timeout_ms(n: int, dimension: int) -> int:
    """A pass's time limit from public sizes: 60 s plus 20 µs per encoded cell (the PL/pgSQL
    transition runs at ≈ 1–3 µs per cell here), so a healthy pass never meets it."""
    return int(60_000 + 0.02 * n * max(1, dimension))


class BoltOnRun:
    """A bolt-on plan's run, checked against the loss: what the passes need."""

    def __init__(self, config: BoltOnConfig, schedule: StepSchedule) -> None:
        self.config = config
        self.schedule = schedule


def checked_run(plan: ReleasePlan, loss: Loss) -> BoltOnRun:
    """:meth:`BoltOnPSGD.fit`'s plan checks (:func:`~service.optimizers.bolt_on_psgd.
    checked_plan`), then this mode's: the loss is the logistic one and the constants are
    ≥ :data:`SMALLEST_CONSTANT`.
    Public values only: ``ValueError`` / :class:`InDatabaseUnsupported` (field, message)."""
    config, schedule = checked_plan(plan, loss)
    check_in_database_run(loss, config, schedule)
    return BoltOnRun(config, schedule)


def check_in_database_run(loss: Loss, config: BoltOnConfig, schedule: StepSchedule) -> None:
    """Refuse (naming the field) what the PL/pgSQL aggregate does not run: another loss than
    the logistic one, or a step size, l2, clip or radius below :data:`SMALLEST_CONSTANT`."""
    if not isinstance(loss, LogisticLoss):
        raise InDatabaseUnsupported("model", "in-database execution runs logistic regression")
    m, _ = pass_layout(config.n, config.batch_size)
    smallest_step = schedule.initial
    if schedule.decay_start is not None:
        smallest_step = min(smallest_step, 1.0 / (schedule.l2 * config.passes * m))
    if not smallest_step >= SMALLEST_CONSTANT:
        raise InDatabaseUnsupported(
            "optimizer.params.step_size", "the in-database SGD needs steps of at least 2^-200"
        )
    if 0.0 < loss.l2 < SMALLEST_CONSTANT:
        raise InDatabaseUnsupported("model.l2", "the in-database SGD needs l2 = 0 or ≥ 2^-200")
    clip = loss.gradient_clip
    if clip is not None and clip < SMALLEST_CONSTANT:
        raise InDatabaseUnsupported(
            "model.gradient_clip", "the in-database SGD needs gradient_clip ≥ 2^-200"
        )
    if config.radius is not None and config.radius < SMALLEST_CONSTANT:
        raise InDatabaseUnsupported(
            "optimizer.params.radius", "the in-database SGD needs radius ≥ 2^-200"
        )


def fit_bolt_on_in_database(
    conn: Connection,
    plan: ReleasePlan,
    loss: Loss,
    n: int,
    d: int,
    rng: SecureRandom,
    progress: ProgressCallback,
    *,
    label_class: int | None = None,
) -> FloatArray:
    """:meth:`BoltOnPSGD.fit` with the rows inside the database: ``conn`` is the session of
    :func:`~service.workers.in_database.encoded_rows` opened with ``positions=True``; the
    passes run there (:func:`in_database_permutation_sgd`), the noise is drawn here, after
    them, from ``rng`` — the same draws as the worker path. ``label_class`` = k: class k
    against the rest of a categorical label (module docstring)."""
    run = checked_run(plan, loss)
    config = run.config
    if (n, d) != (config.n, config.d):
        raise ValueError("the data's shape differs from the plan's public n and d")
    w = in_database_permutation_sgd(
        conn,
        loss,
        n=n,
        d=d,
        passes=config.passes,
        batch_size=config.batch_size,
        schedule=run.schedule,
        averaging=config.averaging,
        radius=config.radius,
        rng=rng,
        progress=progress,
        label_class=label_class,
    )
    return release_with_noise(plan.mechanism, w, plan.noise_scale, plan.sensitivity, rng)


def in_database_permutation_sgd(
    conn: Connection,
    loss: LogisticLoss | Loss,
    *,
    n: int,
    d: int,
    passes: int,
    batch_size: int,
    schedule: StepSchedule | InverseSqrtSchedule,
    averaging: bool,
    radius: float | None,
    rng: SecureRandom | np.random.Generator,
    progress: ProgressCallback | None = None,
    step_noise: Callable[[], FloatArray] | None = None,
    label_class: int | None = None,
) -> FloatArray:
    """:func:`~service.optimizers.bolt_on_psgd.permutation_sgd` over ``pg_temp.dpfit_rows``:
    k passes, each one aggregate query over a fresh permutation from ``rng``; returns w_T or
    the average of w_1 … w_T. ``step_noise`` (per-step-noise SGD: ``noisy_sgd_scs13``'s
    ``noisy_permutation_sgd``, for the bench) adds one draw to every step's gradient, drawn
    after the pass's permutation as ``run_sgd`` does; its schedule may be η_t = c/√t.
    ``label_class`` = k: the rows' label is +1 where their class index is k, −1 elsewhere.

    The session's temporary function, aggregate and tables are dropped on the way out;
    database errors become a generic :class:`SourceError`."""
    secure = as_secure(rng)
    if not isinstance(loss, LogisticLoss):
        raise InDatabaseUnsupported("model", "in-database execution runs logistic regression")
    m, _ = pass_layout(n, batch_size)
    q, r = divmod(n, m)
    clip = loss.gradient_clip
    sqrt_decay = isinstance(schedule, InverseSqrtSchedule)
    if sqrt_decay:
        initial, l2, decay_start = schedule.scale, float(loss.l2), None
    else:
        initial, l2, decay_start = schedule.initial, schedule.l2, schedule.decay_start
    if l2 != loss.l2:
        raise ValueError("the schedule was made for a different l2")
    cfg = [
        float(d),
        float(q),
        float(r),
        float(initial),
        float(l2),
        -1.0 if decay_start is None else float(decay_start),
        0.0 if radius is None else float(radius),
        1.0 if averaging else 0.0,
        0.0 if clip is None or clip >= 1.0 else float(clip),
        FLUSH,
        1.0 if sqrt_decay else 0.0,
    ]
    # the last seq of every batch (np.array_split: r batches of q + 1 rows, then q rows)
    batch_ends = np.cumsum(np.where(np.arange(m) < r, q + 1, q)) - 1
    query = _pass_query(d, noisy=step_noise is not None, one_vs_rest=label_class is not None)
    binds: dict[str, float] = {} if label_class is None else {"cls": float(label_class)}
    state = np.zeros(2 * d + 1, dtype=np.float64)
    try:
        _create_objects(conn, noisy=step_noise is not None, timeout=pass_timeout_ms(n, d))
        for p in range(passes):
            _ship_order(conn, secure, n)
            if step_noise is not None:
                _ship_noise(conn, batch_ends, [step_noise() for _ in range(m)])
            row = conn.execute(query, {"init": state.tolist(), "cfg": cfg, **binds}).scalar_one()
            result = np.asarray(row, dtype=np.float64)
            state = np.concatenate([result[: 2 * d], result[3 * d : 3 * d + 1]])
            conn.commit()
            if progress is not None:
                progress((p + 1) * m)
    except (SQLAlchemyError, psycopg.Error):
        raise SourceError(_FAILED) from None
    finally:
        _drop_objects(conn)
    out: FloatArray = state[d : 2 * d].copy() if averaging else state[:d].copy()
    return out


def _pass_query(d: int, *, noisy: bool, one_vs_rest: bool = False) -> sa.TextClause:
    row = ", ".join(f"r.x{j}" for j in range(d))
    # one-vs-rest: ±1 exactly from the class index, the class bound as :cls
    label = (
        "CASE WHEN r.y = CAST(:cls AS double precision) THEN 1.0::double precision "
        "ELSE -1.0::double precision END"
        if one_vs_rest
        else "r.y"
    )
    noise = "z.z" if noisy else "NULL::double precision[]"
    join = f" LEFT JOIN pg_temp.{_NOISE} z ON z.seq = o.seq" if noisy else ""
    # the per-step noise is joined at the batch ends by the row's rank in the pass (seq)
    order = (
        f"(SELECT pos, key, row_number() OVER (ORDER BY key) - 1 AS seq FROM pg_temp.{_ORDER} "
        "OFFSET 0)"
        if noisy
        else f"pg_temp.{_ORDER}"
    )
    return sa.text(
        f"SELECT {_PASS}(ARRAY[{row}]::double precision[], {label}, {noise}, "
        "CAST(:init AS double precision[]), CAST(:cfg AS double precision[]) ORDER BY o.key) "
        f"FROM {order} o JOIN {_ROWS} r ON r.pos = o.pos{join}"
    )


def _create_objects(conn: Connection, *, noisy: bool, timeout: int) -> None:
    conn.exec_driver_sql(f"SET statement_timeout = {int(timeout)}")
    conn.exec_driver_sql(_STEP_SQL)
    conn.exec_driver_sql(_PASS_SQL)
    conn.exec_driver_sql(
        f"CREATE TEMPORARY TABLE {_ORDER} (pos bigint, key bigint) ON COMMIT PRESERVE ROWS"
    )
    if noisy:
        conn.exec_driver_sql(
            f"CREATE TEMPORARY TABLE {_NOISE} (seq bigint, z double precision[]) "
            "ON COMMIT PRESERVE ROWS"
        )
    conn.exec_driver_sql(f"ANALYZE {_ROWS}")
    conn.commit()


def _drop_objects(conn: Connection) -> None:
    try:
        conn.rollback()
        for statement in _DROP_SQL:
            conn.exec_driver_sql(statement)
        conn.commit()
    except SQLAlchemyError:
        pass


_COPY_HEADER = b"PGCOPY\n\xff\r\n\x00" + (0).to_bytes(4, "big") + (0).to_bytes(4, "big")
_COPY_TRAILER = (-1).to_bytes(2, "big", signed=True)
_KEY_TUPLE = np.dtype(
    [("fields", ">i2"), ("pos_len", ">i4"), ("pos", ">i8"), ("key_len", ">i4"), ("key", ">u8")]
)
_TOP_BIT = np.uint64(1 << 63)


def _key_chunks(secure: SecureRandom, n: int) -> Iterator[bytes]:
    """Binary COPY of (pos = i, key = u_i XOR 2⁶³) for the next n words u of ``secure``, drawn
    2¹⁶ at a time: the byte stream of :meth:`SecureRandom.words` does not depend on how the
    draws are split, so these are the words ``secure.permutation(n)`` would draw. Flipping the
    top bit maps the unsigned order onto the signed ``bigint`` order."""
    yield _COPY_HEADER
    for start in range(0, n, _COPY_CHUNK):
        stop = min(start + _COPY_CHUNK, n)
        block = np.empty(stop - start, dtype=_KEY_TUPLE)
        block["fields"] = 2
        block["pos_len"] = 8
        block["pos"] = np.arange(start, stop)
        block["key_len"] = 8
        block["key"] = secure.words(stop - start) ^ _TOP_BIT
        yield block.tobytes()
    yield _COPY_TRAILER


_TIE = f"SELECT EXISTS (SELECT 1 FROM pg_temp.{_ORDER} GROUP BY key HAVING count(*) > 1)"


def _ship_order(conn: Connection, secure: SecureRandom, n: int) -> None:
    """π = ``secure.permutation(n)`` into ``pg_temp.dpfit_order`` as (pos, key), the pass
    ordered by key: the same words and the same rejection (all n keys redrawn while two are
    equal) as :meth:`SecureRandom.permutation`, the words streamed, never held."""
    raw = conn.connection.driver_connection
    statement = f"COPY pg_temp.{_ORDER} (pos, key) FROM STDIN (FORMAT BINARY)"
    while True:
        conn.exec_driver_sql(f"TRUNCATE pg_temp.{_ORDER}")
        with raw.cursor() as cursor, cursor.copy(statement) as copy:  # type: ignore[union-attr]
            for chunk in _key_chunks(secure, n):
                copy.write(chunk)
        if n < 2 or not conn.exec_driver_sql(_TIE).scalar_one():
            break
    conn.exec_driver_sql(f"ANALYZE pg_temp.{_ORDER}")


def _ship_noise(conn: Connection, batch_ends: np.ndarray, draws: list[FloatArray]) -> None:
    conn.exec_driver_sql(f"TRUNCATE pg_temp.{_NOISE}")
    raw = conn.connection.driver_connection
    statement = f"COPY pg_temp.{_NOISE} (seq, z) FROM STDIN"
    with raw.cursor() as cursor, cursor.copy(statement) as copy:  # type: ignore[union-attr]
        for seq, z in zip(batch_ends.tolist(), draws, strict=True):
            # repr is the shortest round-trip text; float8in reads it back exactly
            values = ",".join(repr(float(v)) for v in z)
            copy.write(f"{seq}\t{{{values}}}\n".encode())
