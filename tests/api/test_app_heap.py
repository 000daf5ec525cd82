"""The app freezes the heap it starts with (service/api/app.py, lifespan): the objects that live
as long as the process leave the collector's generations, so a full collection no longer walks
them with the GIL held while requests wait; stopping the app hands them back."""

from __future__ import annotations

import gc
from pathlib import Path

from tests.support.inprocess import in_process_app


def test_a_running_app_has_its_startup_heap_frozen_and_stopping_it_unfreezes(
    tmp_path: Path,
) -> None:
    before = gc.get_freeze_count()  # > 0 while a session-wide app of the suite runs
    with in_process_app(f"sqlite:///{tmp_path / 'dpfit.db'}", tmp_path) as (client, _):
        frozen = gc.get_freeze_count()
        assert frozen > before + 1_000  # this app's routes, engine and pools at least
        assert client.get("/healthz").status_code == 200
        # A full collection walks what requests created, not the frozen heap.
        assert len(gc.get_objects(generation=2)) < frozen
    assert gc.get_freeze_count() == 0
