"""dpfit — the Python client of the dpfit service (differentially private model fitting).

>>> import dpfit
>>> c = dpfit.Client()                      # $DPFIT_URL, $DPFIT_API_KEY
>>> m = c.fit("ds_…", "logistic_regression", epsilon=1.0, delta=1e-6, l2=0.01)
>>> m.predict(df), m.to_sklearn()
>>> m.evaluate("ds_holdout", epsilon=0.1, delta=1e-6).metrics  # noised accuracy …

The generated low-level client (one function per endpoint) is ``dpfit_client``; this package
is built on it and is what people use.
"""

from dpfit.client import Client, Estimate, Evaluation, Job
from dpfit.encoding import PublicEncoding
from dpfit.errors import (
    AuthError,
    BudgetExceeded,
    Conflict,
    ConnectionFailed,
    DpfitError,
    InvalidSpec,
    JobFailed,
    NotFound,
    PredictionWarning,
)
from dpfit.model import Model

__version__ = "0.2.0"
__all__ = [
    "AuthError",
    "BudgetExceeded",
    "Client",
    "Conflict",
    "ConnectionFailed",
    "DpfitError",
    "Estimate",
    "Evaluation",
    "InvalidSpec",
    "Job",
    "JobFailed",
    "Model",
    "NotFound",
    "PredictionWarning",
    "PublicEncoding",
]
