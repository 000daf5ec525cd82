"""Domain errors the service functions raise and the API maps to problem+json in ONE place
(``service/api/errors.py:install_error_handlers``).

Errors that belong to one module stay there and are mapped the same way: ``BudgetExceeded`` and
``IdempotencyConflict`` (ledger/admission.py), ``InfeasibleSpec`` (optimizers/kits/base.py), the
registration errors (registration.py). Messages never quote data; a ``field`` names the part
of the request at fault.
"""

from __future__ import annotations


class DatasetNotFound(LookupError):
    """No such dataset, or one the caller may not see (the same answer for both)."""

    def __init__(self, dataset_id: str, field: str | None = None) -> None:
        super().__init__(dataset_id)
        self.dataset_id = dataset_id
        self.field = field


class ConcurrentChange(Exception):
    """A concurrent request changed what this one relied on; nothing was written. Retry."""
