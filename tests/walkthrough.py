"""Shim: the helpers moved to tests/support/walkthrough.py. Kept for tests/test_auto.py until it
moves into its layer; new code imports tests.support.walkthrough."""

from tests.support.walkthrough import (
    COPIES,
    CREDIT_FEATURES,
    CREDIT_LABEL,
    EXAMPLES,
    PREDICT_ROWS,
    credit_dataset,
    fresh_credit_copy,
    logistic_job,
    write_large_credit,
)

__all__ = [
    "COPIES",
    "CREDIT_FEATURES",
    "CREDIT_LABEL",
    "EXAMPLES",
    "PREDICT_ROWS",
    "credit_dataset",
    "fresh_credit_copy",
    "logistic_job",
    "write_large_credit",
]
