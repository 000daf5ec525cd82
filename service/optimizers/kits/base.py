"""The interface every private optimizer implements.

An optimizer works in two phases, so that everything the ledger charges is fixed before a
worker reads a single row:

1. ``plan(params, loss, n, d, target)`` — from public information only (the job spec, the
   loss constants, the public row count ``n`` and encoded dimension ``d``) it resolves the
   hyper-parameters (theory-derived defaults), the sensitivity of what it releases, the noise
   calibrated to the target (ε, δ), and the exact ``dp_accounting`` event of the release.
2. ``fit(plan, loss, X, y, rng, progress)`` — runs on the private rows and returns the
   **noised** parameter vector. ``progress(step)`` is called with the number of finished steps
   (out of ``plan.total_steps``); it may raise :class:`JobCancelled` to stop the run.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, Protocol, get_args

from dp_accounting import dp_event
from pydantic import BaseModel

from service.models.base import FloatArray, Loss
from service.optimizers.kits.config import PlanConfig
from service.privacy.secure_random import SecureRandom
from service.privacy.target import InfeasibleSpec, PrivacyTarget

__all__ = [
    "MECHANISMS",
    "InfeasibleSpec",
    "JobCancelled",
    "Mechanism",
    "Optimizer",
    "PrivacyTarget",
    "ProgressCallback",
    "ReleasePlan",
    "as_mechanism",
]

#: The noise a plan releases with (stored in plan JSON and in the models table; never remove
#: or rename a value — stored plans name it). "gaussian" / "norm_gamma": one draw on the
#: released vector (or one per-step draw accounted as one mechanism); "*_per_step": Gaussian
#: noise on every step's gradient query (full batches, sampled batches, SVRG differences;
#: "anchored_": centred steps plus one release of the label term, ``dp_agd_centred``);
#: "repeat_and_select+gaussian": a private selection over Gaussian fits; "tuning+<m>": a
#: private tuning whose candidates release with <m>.
Mechanism = Literal[
    "gaussian",
    "norm_gamma",
    "gaussian_per_step",
    "sampled_gaussian_per_step",
    "svrg_gaussian_per_step",
    "anchored_gaussian_per_step",
    "repeat_and_select+gaussian",
    "tuning+gaussian",
    "tuning+norm_gamma",
    "tuning+gaussian_per_step",
    "tuning+sampled_gaussian_per_step",
    "tuning+svrg_gaussian_per_step",
    "tuning+anchored_gaussian_per_step",
    "tuning+repeat_and_select+gaussian",
]

MECHANISMS: frozenset[str] = frozenset(get_args(Mechanism))


def as_mechanism(value: str) -> Mechanism:
    """``value`` as a :data:`Mechanism`; ``ValueError`` for a name no release uses."""
    if value not in MECHANISMS:
        raise ValueError(f"unknown release mechanism {value!r}")
    return value  # type: ignore[return-value]  # checked against the Literal's values


class JobCancelled(Exception):
    """Raised from a progress callback to stop an optimizer between steps."""


@dataclass(frozen=True)
class ReleasePlan:
    """Everything about a job's release that is fixed before the data is read.

    ``mechanism`` names the noise ("gaussian": z ~ N(0, σ² I) with σ = ``noise_scale``;
    "norm_gamma": density ∝ exp(−‖z‖/``noise_scale``), i.e. ``noise_scale`` = Δ/ε).
    ``sensitivity`` is the replace-one L2 sensitivity Δ of the noiseless released vector.
    ``event`` is the dp_accounting event whose RDP curve the ledger charges.

    ``parallel_events``, when non-empty, declares a *parallel* composition: the job runs these
    mechanisms on disjoint parts of the data (a partition drawn independently of the data), so
    a neighbouring pair differs in the input of at most one of them and the job's RDP curve is
    the pointwise maximum of theirs (Rényi divergence is quasi-convex over the public mixing).
    ``event`` is then their plain composition — an upper bound kept for audit and for any
    consumer that ignores the declaration.
    """

    mechanism: Mechanism
    sensitivity: float
    noise_scale: float
    event: dp_event.DpEvent
    total_steps: int
    hyperparameters: dict[str, Any] = field(default_factory=dict)
    parallel_events: tuple[dp_event.DpEvent, ...] = ()

    def __post_init__(self) -> None:
        as_mechanism(self.mechanism)


ProgressCallback = Callable[[int], None]


class Optimizer(Protocol):
    """A private optimizer: a catalog entry plus its two phases."""

    name: ClassVar[str]
    summary: ClassVar[str]
    assumptions: ClassVar[str]
    guarantee: ClassVar[str]
    reference: ClassVar[str]
    Params: ClassVar[type[BaseModel]]
    #: The typed view ``fit`` takes of ``ReleasePlan.hyperparameters`` (optimizers/kits/config.py).
    Config: ClassVar[type[PlanConfig]]

    def plan(
        self, params: BaseModel, loss: Loss, n: int, d: int, target: PrivacyTarget
    ) -> ReleasePlan: ...

    def fit(
        self,
        plan: ReleasePlan,
        loss: Loss,
        X: FloatArray,
        y: FloatArray,
        rng: SecureRandom,
        progress: ProgressCallback,
    ) -> FloatArray: ...
