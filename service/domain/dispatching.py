"""What the domain hands an admitted job to: a :class:`Dispatcher`.

The domain (:func:`service.domain.submission.submit_job`) dispatches a job after its admission
commits, through the dispatcher it is given; the workers implement it
(``service.workers.dispatch.DaskDispatcher``, ``SupervisorDispatches``) and tests pass inline
ones. The protocol lives here, below the workers, so the domain never imports them.
"""

from __future__ import annotations

from typing import Protocol

__all__ = ["Dispatcher"]


class Dispatcher(Protocol):
    def submit(self, job_id: str, attempt: int) -> None: ...

    def close(self) -> None: ...

    def describe(self) -> str: ...
