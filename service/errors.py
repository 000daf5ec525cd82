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


class RegistrationRefused(Exception):
    """The registration cannot be accepted; ``field`` is the request field at fault. The
    message quotes the request and counts of the owner's validation report, never a cell."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


class SourceAlreadyRegistered(Exception):
    """The source's location (or a location nesting with it) already backs a dataset, or its
    content, or the content of one of its files, already backs one of the caller's own datasets
    (one budget per data).

    ``existing_id`` is that dataset's id when the caller owns it or is an admin, else ``None``
    (another owner learns only that the location she named is registered, not by which
    dataset; content is never compared across owners)."""

    def __init__(self, existing_id: str | None) -> None:
        super().__init__(existing_id or "")
        self.existing_id = existing_id


class DatasetHasCharges(Exception):
    """The dataset cannot be withdrawn: a job was submitted on it, so the ledger holds its
    charge (append-only) and the budget it spent is final."""

    def __init__(self, dataset_id: str) -> None:
        super().__init__(dataset_id)
        self.dataset_id = dataset_id


class SourceNotOpen(Exception):
    """The dataset's source lies outside the data roots (or SQL connections) open to its owner
    on this server, so no worker could read it: refused before anything is charged. Says
    nothing about the data (the check reads only the server's configuration and the stored
    location, never the source)."""

    def __init__(self, dataset_id: str) -> None:
        super().__init__(dataset_id)
        self.dataset_id = dataset_id


class DatasetRetired(Exception):
    """The dataset was retired by an admin: its budget is final, no job is admitted."""

    def __init__(self, dataset_id: str) -> None:
        super().__init__(dataset_id)
        self.dataset_id = dataset_id
