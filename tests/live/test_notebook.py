"""`Client.fit(..., progress=True)` in Jupyter: a real notebook run by a real IPython kernel
(nbclient + ipykernel) against a live `dpfit serve`.

What we support in a notebook: the ipywidgets progress bar of ``tqdm.auto`` (ipywidgets is in
the ``dev`` extra; without it tqdm falls back to a text bar on stderr, which the terminal test in
tests/live/test_sdk_client.py covers). The test asserts what a person sees: the fit cell displays a
widget view (``application/vnd.jupyter.widget-view+json``), and the widget state the kernel sent
(kept by nbclient in the notebook's metadata, as Jupyter saves it) holds a progress bar that
reached the job's total number of steps, finished in tqdm's ``success`` style, labelled with the
job's id; the cell's result is the released model.

The test skips only when ``CI`` is not ``true`` and no kernel can start here.
"""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.support.live import LiveServer
from tests.support.walkthrough import credit_dataset

pytestmark = pytest.mark.slow

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"


def _kernel_unavailable(reason: str) -> None:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{reason} (CI=true: the notebook test must run)")
    pytest.skip(reason)


def run_notebook(cells: list[str], workdir: Path) -> Any:
    """Execute ``cells`` in a fresh python3 kernel (this interpreter: ipykernel's native
    kernelspec) and return the executed notebook."""
    try:
        import nbformat
        from jupyter_client.kernelspec import NoSuchKernel
        from nbclient import NotebookClient
        from nbclient.exceptions import DeadKernelError
    except ImportError as exc:
        _kernel_unavailable(f"the notebook test needs nbclient and ipykernel: {exc}")
        raise
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(source) for source in cells]
    client = NotebookClient(
        nb,
        timeout=600,
        startup_timeout=300,
        kernel_name="python3",
        resources={"metadata": {"path": str(workdir)}},
        store_widget_state=True,
    )
    client.create_kernel_manager()
    try:
        client.start_new_kernel()
        client.start_new_kernel_client()  # waits until the kernel answers
    except (NoSuchKernel, DeadKernelError, RuntimeError, TimeoutError) as exc:
        if client.km is not None:
            client._cleanup_kernel()
        _kernel_unavailable(f"no IPython kernel could start: {type(exc).__name__}: {exc}")
    try:
        for index, cell in enumerate(nb.cells):
            client.execute_cell(cell, index)
        client.set_widgets_metadata()
    finally:
        client._cleanup_kernel()
    return nb


def test_fit_shows_a_widget_progress_bar_in_jupyter(
    sqlite_server: LiveServer, tmp_path: Path
) -> None:
    tag = uuid.uuid4().hex[:6]
    owner = sqlite_server.key(f"nb-owner-{tag}", "owner")
    analyst_name = f"nb-analyst-{tag}"
    analyst = sqlite_server.key(analyst_name, "analyst")
    with sqlite_server.client(owner) as client:
        dataset = client.post("/v1/datasets", json=credit_dataset(epsilon=5.0))
        assert dataset.status_code == 201, dataset.text
        dataset_id = dataset.json()["id"]
        grant = client.post(f"/v1/datasets/{dataset_id}/grants", json={"principal": analyst_name})
        assert grant.status_code == 201, grant.text

    nb = run_notebook(
        [
            f"import dpfit\nc = dpfit.Client({sqlite_server.base_url!r}, {analyst!r})",
            f"m = c.fit({dataset_id!r}, 'logistic_regression', epsilon=0.5, delta=1e-6,"
            " l2=0.01, progress=True)\nm",
            "import json\nprint(json.dumps({'model': m.id, 'job': m.job_id}))",
        ],
        tmp_path,
    )
    errors = [o for cell in nb.cells for o in cell.outputs if o.output_type == "error"]
    assert errors == [], errors
    printed = json.loads(
        "".join(o.text for o in nb.cells[2].outputs if o.output_type == "stream")
    )
    with sqlite_server.client(analyst) as client:
        job = client.get(f"/v1/jobs/{printed['job']}").json()
    assert job["status"] == "succeeded" and job["model_id"] == printed["model"]
    total = job["progress"]["total"]
    assert total > 0

    fit_outputs = nb.cells[1].outputs
    views = [o for o in fit_outputs if WIDGET_VIEW in o.get("data", {})]
    assert views, f"no widget in the fit cell's outputs: {fit_outputs}"
    assert not [o for o in fit_outputs if o.output_type == "stream" and o.name == "stderr"], (
        "a text bar was printed instead of (or beside) the widget"
    )
    shown = [o for o in fit_outputs if o.output_type == "execute_result"]
    assert shown and printed["model"] in shown[0]["data"]["text/plain"]  # the cell's value: m

    state = nb.metadata["widgets"][WIDGET_STATE]["state"]
    bars = [
        w["state"] for w in state.values() if w["model_name"] in ("FloatProgressModel",
                                                                   "IntProgressModel")
    ]
    assert len(bars) == 1, state
    bar = bars[0]
    assert bar["max"] == total and bar["value"] == total
    assert bar["bar_style"] == "success"
    labels = " ".join(  # tqdm.notebook pads its label with figure spaces (U+2007)
        str(w["state"].get("value", "")).replace("\u2007", " ")
        for w in state.values()
        if w["model_name"] == "HTMLModel"
    )
    assert f"job {printed['job']}" in labels and f"{total}/{total}" in labels, labels
    assert "succeeded" in labels, labels
