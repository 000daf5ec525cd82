"""Model types the client treats apart (the service's catalog names them: ``GET /v1/optimizers``).

Shared by :mod:`dpfit.model` (scoring) and :mod:`dpfit.sklearn_export` (the estimator chosen),
so neither imports the other for them.
"""

from __future__ import annotations

__all__ = ["JOINT_MULTICLASS_MODELS", "REGRESSION_MODELS"]

#: Model types whose label is a number (the others are classifiers).
REGRESSION_MODELS = frozenset({"huber_regression", "cauchy_regression"})
#: Model types fitted jointly over a categorical label's classes (scored by a softmax).
JOINT_MULTICLASS_MODELS = frozenset({"multinomial_logistic_regression"})
