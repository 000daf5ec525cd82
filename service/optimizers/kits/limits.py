"""The compute guards on a job spec: one cap per unit of work, the same for every optimizer.

A cap is a runtime guard, not a privacy bound: the accounting of every optimizer holds for any
number of steps (the noise is calibrated to the count it is given). The caps only keep one job
from occupying a worker for days. They are enforced by the optimizers' parameter models
(``Field(le=...)``), so a request over a cap is a 422 on the field at fault
(``optimizer.params.<name>``) with pydantic's "less than or equal to" message, like every
other range check.

Units:

- :data:`FULL_GRADIENT_STEPS_CAP`: steps that each read all n rows (a full gradient, possibly
  with a few variance-reduced batch steps in between): ``dp_gd``, ``dp_agd``,
  ``dp_agd_averaged``, ``dp_accmd``, ``output_perturbation_gd``, ``dp_spiderboost``.
- :data:`SAMPLED_STEPS_CAP`: steps that each read a batch of b rows (b ≤ n; the job's total
  is steps × b): ``noisy_sgd_bst14``, ``rrpsgd`` (rounds), ``dp_svrg`` / ``dp_svrg_pp``
  (inner steps over all epochs).
- :data:`PASSES_CAP`: passes over the data, for the optimizers that count passes
  (``noisy_sgd_scs13``, ``bolt_on_psgd``).
- :data:`WEIGHTS_CAP`: weights of the released model — the encoded width d (the schema's
  columns, one-hot categories included, and the intercept), times K for a categorical label
  (joint or one-vs-rest). Every fit holds a few vectors of that length and the release is
  stored and served whole; the schema's own caps (4,096 columns, 10,000 categories a feature,
  10,000 classes) allow 10⁸ weights and more, where the fit runs out of memory after the
  charge. Checked at planning from the schema (:func:`~service.optimizers.kits.planning.plan_job`),
  a 422 on ``model``.

One numeric guard, also public and data-independent: :data:`SAFE_MAGNITUDE`, the largest
magnitude a plan's quantities may have (the loss's constants, the declared label bound, the
sensitivity, the noise scale, one step's move). A plan beyond it is refused at planning
(service/optimizers/kits/planning.py,
:func:`~service.optimizers.kits.gradient_kit.check_step_size`), so a fit never overflows into a
NaN model or fails for certain after its charge. And no stored plan holds a non-finite number
anywhere (:func:`first_non_finite`): JSON has none (PostgreSQL refuses ``Infinity`` in a plan,
SQLite would store it), and a derived quantity that overflowed is a plan the fit cannot run.
"""

from __future__ import annotations

import math
from typing import Any, Final

__all__ = [
    "FULL_GRADIENT_STEPS_CAP",
    "PASSES_CAP",
    "SAFE_MAGNITUDE",
    "SAMPLED_STEPS_CAP",
    "WEIGHTS_CAP",
    "first_non_finite",
]

#: Most steps a job may ask for when every step reads all n rows.
FULL_GRADIENT_STEPS_CAP: Final = 100_000

#: Most steps a job may ask for when every step reads one batch of rows.
SAMPLED_STEPS_CAP: Final = 1_000_000

#: Most passes over the data a job may ask for.
PASSES_CAP: Final = 1000

#: Most weights a released model may have (2²⁰: about 20 MB of JSON, 8 MB a vector in a fit).
WEIGHTS_CAP: Final = 1 << 20

#: Largest magnitude of a plan's quantities. Its square (1e300; norms are √(w·w), losses square
#: residuals) and sums of up to 1e8 such squares stay below float64's maximum ≈ 1.8e308;
#: nothing a meaningful job needs comes near it (bounds and constants are in data units).
SAFE_MAGNITUDE: Final = 1e150


def first_non_finite(value: Any) -> tuple[str | int, ...] | None:
    """The path (keys and indices) of the first float in a JSON-like value (dicts, lists,
    tuples) that is NaN or ±∞, or None when every number is finite. Iterative: any depth."""
    stack: list[tuple[tuple[str | int, ...], Any]] = [((), value)]
    while stack:
        path, node = stack.pop()
        if isinstance(node, float):
            if not math.isfinite(node):
                return path
        elif isinstance(node, dict):
            items = [((*path, str(k)), v) for k, v in node.items()]
            stack.extend(reversed(items))
        elif isinstance(node, list | tuple):
            stack.extend(reversed([((*path, i), v) for i, v in enumerate(node)]))
    return None
