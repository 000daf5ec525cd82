"""`dpfit.Client`: the analysts' and owners' high-level client of the dpfit HTTP API.

It sits on the generated low-level client (``dpfit_client``: base URL, bearer key, timeouts,
``httpx`` arguments) and adds what a person expects from a Python library: typed exceptions
(:mod:`dpfit.errors`), lists that follow every page, jobs that are followed to the end with a
progress bar, models that predict locally, and retries that never charge twice.

Retries: requests that cannot change anything twice (reads, prediction, estimates, grants,
cancellation) and job and evaluation submissions — which always carry an ``Idempotency-Key`` —
are retried on
connection errors and on 502/503/504 answers (e.g. the service's 503 while its database is
unreachable), ``retries`` times with exponential backoff. A retried submission carries the
SAME key, so the service returns the job it admitted the first time and charges once.
Registration and key creation are never retried.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from typing import Any
from urllib.parse import quote

import httpx

from dpfit.errors import (
    ConnectionFailed,
    DpfitError,
    JobFailed,
    raise_for_problem,
    warn_about_rows,
)
from dpfit.model import Model, records

__all__ = ["DEFAULT_URL", "Client", "Estimate", "Evaluation", "Job"]

DEFAULT_URL = "http://127.0.0.1:8000"
NEXT_CURSOR = "X-Next-Cursor"
FINISHED = ("succeeded", "failed", "cancelled")
RETRIED_STATUSES = frozenset({502, 503, 504})

ModelArg = str | Mapping[str, Any]
OptimizerArg = str | Mapping[str, Any] | None


def job_body(
    dataset_id: str,
    model: ModelArg,
    optimizer: OptimizerArg,
    epsilon: float,
    delta: float,
    **model_params: Any,
) -> dict[str, Any]:
    """The JSON body of ``POST /v1/jobs``: ``model`` is a type name (``"logistic_regression"``,
    extra keyword arguments become its parameters, e.g. ``l2=0.01``) or a whole spec dict;
    ``optimizer`` a name, a ``{"name", "params"}`` dict, or ``None``: omitted, so that the
    service chooses (its ``auto`` optimizer, which records its choice in the job's plan).
    """
    spec = {"type": model, **model_params} if isinstance(model, str) else dict(model)
    if isinstance(model, Mapping) and model_params:
        spec.update(model_params)
    body: dict[str, Any] = {"dataset_id": dataset_id, "model": spec}
    if isinstance(optimizer, str):
        body["optimizer"] = {"name": optimizer, "params": {}}
    elif optimizer is not None:
        body["optimizer"] = {"params": {}, **dict(optimizer)}
    body["privacy"] = {"epsilon": epsilon, "delta": delta}
    return body


def evaluation_body(dataset_id: str, epsilon: float, delta: float, loss_clip: float | None) -> dict[str, Any]:
    """The JSON body of ``POST /v1/models/{id}/evaluate`` (and of its estimate): ``loss_clip``
    ``None`` is omitted, so the service clips nothing (its default bound of any row's loss)."""
    body: dict[str, Any] = {"dataset_id": dataset_id, "privacy": {"epsilon": epsilon, "delta": delta}}
    if loss_clip is not None:
        body["loss_clip"] = loss_clip
    return body


def follow(item: Any, timeout: float | None, poll: float, show: Callable[[], None] | None = None) -> None:
    """Refresh ``item`` (a :class:`Job` or an :class:`Evaluation`) until it is done: every
    ``poll`` seconds, growing ×1.5 up to 2 s; ``show`` is called after each fetch (and once
    before the first wait). Raises ``TimeoutError`` after ``timeout`` seconds."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        if show is not None:
            show()
        if item.done:
            return
        if deadline is not None and time.monotonic() > deadline:
            raise TimeoutError(f"job {item.id} is still {item.status}")
        time.sleep(poll)
        poll = min(poll * 1.5, 2.0)
        item.refresh()


class Estimate(dict):  # type: ignore[type-arg]
    """The answer of ``POST /v1/jobs/estimate`` or ``POST /v1/models/{id}/evaluate/estimate``
    (a dict with attribute access): ``admissible``, ``reason``, ``epsilon_spent_after``,
    ``epsilon_remaining_after``, ``mechanism``, ``noise_scale``, ``sensitivity``, ``steps``,
    ``plan`` (the release plan a submission would store: ``plan["auto"]`` records what the
    service's ``auto`` optimizer chose) … Nothing was charged."""

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


class _Tracked:
    """What a job and an evaluation share: the last fetched JSON (``data``), its id, status,
    error and whether it has finished."""

    def __init__(self, client: Client, data: Mapping[str, Any]) -> None:
        self._client = client
        self.data: dict[str, Any] = dict(data)

    @property
    def id(self) -> str:
        return str(self.data["id"])

    @property
    def status(self) -> str:
        return str(self.data["status"])

    @property
    def error(self) -> str | None:
        return self.data.get("error")

    @property
    def done(self) -> bool:
        return self.status in FINISHED


class Job(_Tracked):
    """A submitted job. Attributes mirror ``GET /v1/jobs/{id}`` as last fetched (``status``,
    ``progress``, ``model_id``, ``error``, ``refunded`` …); :meth:`refresh` fetches again."""

    @property
    def progress(self) -> tuple[int, int]:
        """``(step, total)``; ``total`` is fixed before any data is read."""
        p = self.data.get("progress") or {}
        return int(p.get("step", 0)), int(p.get("total", 0))

    @property
    def model_id(self) -> str | None:
        return self.data.get("model_id")

    @property
    def plan(self) -> dict[str, Any]:
        """The job's public release plan (mechanism, noise, sensitivity, steps,
        ``hyperparameters``). A job that named no optimizer has ``plan["auto"]``: the service's
        record of its choice (``optimizer``, and ``filled``: the model fields it set, e.g.
        ``{"model.l2": …, "model.gradient_clip": 0.5}``)."""
        return dict(self.data.get("plan") or {})

    @property
    def refunded(self) -> bool:
        return bool(self.data.get("refunded"))

    def refresh(self) -> Job:
        self.data = self._client._json("GET", f"/v1/jobs/{self.id}")
        return self

    def cancel(self) -> Job:
        """Cancel (refunded only if no worker read the data yet)."""
        self.data = self._client._json("POST", f"/v1/jobs/{self.id}/cancel", retry=True)
        return self

    def wait(self, progress: bool = False, timeout: float | None = None, poll: float = 0.25) -> Job:
        """Follow the job until it finishes; raises :class:`JobFailed` if it failed or was
        cancelled, ``TimeoutError`` after ``timeout`` seconds. ``progress=True`` shows a tqdm
        bar (``tqdm.auto``: a terminal bar, or a widget in Jupyter) on stderr, whose final
        state is drawn once (when it closes)."""
        bar = None

        def show() -> None:
            nonlocal bar
            bar = self._show(bar)

        try:
            follow(self, timeout, poll, show if progress else None)
        finally:
            if bar is not None:
                bar.close()
        if self.status != "succeeded":
            raise JobFailed(self)
        return self

    def _show(self, bar: Any) -> Any:
        step, total = self.progress
        if bar is None:
            from tqdm.auto import tqdm

            bar = tqdm(total=total or None, desc=f"job {self.id}", unit="step")
        if total and bar.total != total:
            bar.total = total
        bar.set_postfix_str(self.status, refresh=False)
        if self.done:  # not drawn here: close() draws the final state (else it shows twice)
            bar.n = max(bar.n, step)
        else:
            bar.update(max(0, step - bar.n))
        return bar

    def model(self) -> Model:
        """The released model (the job must have succeeded)."""
        if self.model_id is None:
            raise DpfitError(f"job {self.id} has no model (status {self.status})")
        return self._client.model(self.model_id)

    def __repr__(self) -> str:
        step, total = self.progress
        return f"<dpfit.Job {self.id} {self.status} {step}/{total}>"


class Evaluation(_Tracked):
    """A private evaluation of a released model (its ``id`` is the evaluation job's): a job,
    charged on the evaluation dataset's ledger when accepted, whose result is noised metrics.
    Attributes mirror ``GET /v1/models/{model_id}/evaluations/{id}`` as last fetched
    (``status``, ``metrics``, ``plan``, ``error`` …); :meth:`refresh` fetches again,
    :meth:`wait` follows it to its end.

    ``metrics`` (once succeeded) are the released, noised values: ``accuracy``, ``log_loss`` and
    ``confusion_matrix`` (binary labels), ``accuracy``, ``confusion_matrix`` (K × K) and
    ``undeclared_label_predictions`` (categorical; ``accuracy`` alone above 256 declared
    classes) or ``mean_squared_error`` (numeric). ``stds`` are their noise standard deviations, stated by the plan before any
    charge; ``warnings`` the plan's public warnings (e.g. a loss whose noise spans its range)."""

    @property
    def model_id(self) -> str:
        """The evaluated model."""
        return str(self.data["model_id"])

    @property
    def dataset_id(self) -> str:
        """The dataset evaluated on (its ledger paid)."""
        return str(self.data["dataset_id"])

    @property
    def privacy(self) -> dict[str, Any]:
        return dict(self.data.get("privacy") or {})

    @property
    def plan(self) -> dict[str, Any]:
        """The public release plan: Gaussian ``noise_scale``, ``sensitivity``, the loss clip and
        the metrics' standard deviations in ``hyperparameters``, ``warnings``."""
        return dict(self.data.get("plan") or {})

    @property
    def metrics(self) -> dict[str, Any] | None:
        """The noised metrics once succeeded, else ``None``."""
        metrics = self.data.get("metrics")
        return None if metrics is None else dict(metrics)

    @property
    def stds(self) -> dict[str, float]:
        """The noise standard deviation of each released metric, by metric name (from the
        plan's ``hyperparameters``: ``accuracy_std`` → ``"accuracy"``; the confusion matrix's
        is per cell)."""
        hyper = self.plan.get("hyperparameters") or {}
        suffix = "_std"
        return {k[: -len(suffix)]: float(v) for k, v in hyper.items() if k.endswith(suffix)}

    @property
    def warnings(self) -> list[str]:
        return [str(w) for w in self.plan.get("warnings") or []]

    def refresh(self) -> Evaluation:
        path = f"/v1/models/{self.model_id}/evaluations/{self.id}"
        self.data = self._client._json("GET", path)
        return self

    def wait(self, timeout: float | None = None, poll: float = 0.25) -> Evaluation:
        """Follow the evaluation until it finishes; raises :class:`JobFailed` if it failed or
        was cancelled (``.job`` is this evaluation), ``TimeoutError`` after ``timeout`` s."""
        follow(self, timeout, poll)
        if self.status != "succeeded":
            raise JobFailed(self)
        return self

    def job(self) -> Job:
        """The evaluation as a job (``GET /v1/jobs/{id}``; e.g. to :meth:`Job.cancel` it)."""
        return self._client.job(self.id)

    def __repr__(self) -> str:
        return f"<dpfit.Evaluation {self.id} of {self.model_id} on {self.dataset_id} {self.status}>"


class Client:
    """A session with one dpfit service.

    ``url`` defaults to ``$DPFIT_URL`` (else ``http://127.0.0.1:8000``), ``api_key`` to
    ``$DPFIT_API_KEY``. Use it as a context manager (or call :meth:`close`). ``transport`` and
    other ``httpx_args`` go to the underlying ``httpx.Client``. Lists are read ``page_size``
    items per request (default: the service's, 100) and always followed to the end.
    """

    def __init__(
        self,
        url: str | None = None,
        api_key: str | None = None,
        *,
        timeout: float = 60.0,
        retries: int = 3,
        backoff: float = 0.5,
        transport: httpx.BaseTransport | None = None,
        httpx_args: Mapping[str, Any] | None = None,
        page_size: int | None = None,
    ) -> None:
        from dpfit_client import AuthenticatedClient
        from dpfit_client import Client as AnonymousClient

        self.url = (url or os.environ.get("DPFIT_URL") or DEFAULT_URL).rstrip("/")
        key = api_key if api_key is not None else os.environ.get("DPFIT_API_KEY")
        args = dict(httpx_args or {})
        if transport is not None:
            args["transport"] = transport
        common: dict[str, Any] = {"timeout": httpx.Timeout(timeout), "httpx_args": args}
        self.low_level = (
            AuthenticatedClient(base_url=self.url, token=key, **common)
            if key
            else AnonymousClient(base_url=self.url, **common)
        )
        self._http: httpx.Client = self.low_level.get_httpx_client()
        self.retries = retries
        self.backoff = backoff
        self.page_size = page_size

    # --- session ------------------------------------------------------------------------------

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- HTTP ---------------------------------------------------------------------------------

    def _send(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
        retry: bool | None = None,
    ) -> httpx.Response:
        """One request (retried on connection errors and 502/503/504 when ``retry``, default:
        GET only); raises the typed error of a 4xx/5xx answer."""
        retry = method == "GET" if retry is None else retry
        attempts = 1 + (self.retries if retry else 0)
        for attempt in range(attempts):
            last = attempt + 1 >= attempts
            try:
                response = self._http.request(method, path, json=json, params=params, headers=headers)
            except httpx.TransportError as exc:
                if last:
                    raise ConnectionFailed(f"{method} {self.url}{path}: {type(exc).__name__}: {exc}") from exc
            else:
                if last or response.status_code not in RETRIED_STATUSES:
                    break
            time.sleep(self.backoff * 2**attempt)
        raise_for_problem(response)
        return response

    def _json(self, method: str, path: str, **kwargs: Any) -> Any:
        return self._send(method, path, **kwargs).json()

    def _pages(self, path: str, params: Mapping[str, Any] | None = None) -> Iterator[Any]:
        """Every item of a paginated list (follows ``X-Next-Cursor``)."""
        query = {k: v for k, v in (params or {}).items() if v is not None}
        if self.page_size is not None:
            query["limit"] = self.page_size
        while True:
            response = self._send("GET", path, params=query)
            yield from response.json()
            cursor = response.headers.get(NEXT_CURSOR)
            if not cursor:
                return
            query["cursor"] = cursor

    # --- datasets (owners register and grant; everyone reads what they may see) --------------

    def datasets(self) -> list[dict[str, Any]]:
        """Every dataset you own or were granted (admins: all), oldest first."""
        return list(self._pages("/v1/datasets"))

    def dataset(self, dataset_id: str) -> dict[str, Any]:
        return dict(self._json("GET", f"/v1/datasets/{dataset_id}"))

    def register_dataset(self, spec: Mapping[str, Any]) -> dict[str, Any]:
        """Register a source (owners). A source already registered raises :class:`Conflict`
        whose ``dataset_id`` names the existing dataset (to its owner)."""
        return dict(self._json("POST", "/v1/datasets", json=dict(spec), retry=False))

    def validate_dataset(self, spec: Mapping[str, Any]) -> dict[str, Any]:
        """A dry run of :meth:`register_dataset` (owners): the validation report and whether the
        registration would succeed (``would_register``; ``refusal``: the field and why not).
        Creates nothing; what registration refuses before validating raises as it would."""
        return dict(self._json("POST", "/v1/datasets/validate", json=dict(spec), retry=True))

    def withdraw_dataset(self, dataset_id: str) -> dict[str, Any]:
        """Withdraw a dataset on which no job was ever submitted (its owner or an admin): it is
        removed and its source may be registered again. Raises :class:`Conflict` once a job was
        charged on it."""
        return dict(self._json("DELETE", f"/v1/datasets/{dataset_id}", retry=False))

    def grant(self, dataset_id: str, principal: str, epsilon_cap: float | None = None) -> dict[str, Any]:
        """Let analyst ``principal`` submit jobs on the dataset (owners; idempotent)."""
        body: dict[str, Any] = {"principal": principal}
        if epsilon_cap is not None:
            body["epsilon_cap"] = epsilon_cap
        return dict(self._json("POST", f"/v1/datasets/{dataset_id}/grants", json=body, retry=True))

    def grants(self, dataset_id: str) -> Any:
        """The dataset's grants as a pandas DataFrame, oldest first (owners and admins): one row
        per analyst with ``principal``, ``epsilon_cap`` (NaN: none), ``created_at`` and
        ``epsilon_spent`` (ε at δ_B of that analyst's standing charges)."""
        import pandas as pd

        columns = ["principal", "epsilon_cap", "created_at", "epsilon_spent", "dataset_id"]
        rows = list(self._pages(f"/v1/datasets/{dataset_id}/grants"))
        frame = pd.DataFrame(rows, columns=columns)
        frame["created_at"] = pd.to_datetime(frame["created_at"], utc=True, format="ISO8601")
        frame["epsilon_cap"] = frame["epsilon_cap"].astype(float)
        return frame

    def revoke_grant(self, dataset_id: str, principal: str) -> dict[str, Any]:
        """Revoke ``principal``'s grant (owners and admins): its new jobs are refused from now
        on; the ledger is unchanged and its jobs already admitted keep running. Not retried (a
        second revocation is :class:`NotFound`)."""
        path = f"/v1/datasets/{dataset_id}/grants/{quote(principal, safe='')}/revoke"
        return dict(self._json("POST", path, retry=False))

    def budget(self, dataset_id: str) -> Any:
        """The budget as a one-row pandas DataFrame (``epsilon``, ``delta``, ``epsilon_spent``,
        ``epsilon_remaining``, ``jobs_charged``, ``your_epsilon_spent`` …)."""
        import pandas as pd

        return pd.DataFrame([self._json("GET", f"/v1/datasets/{dataset_id}/budget")])

    def budget_history(self, dataset_id: str) -> Any:
        """The burn-down: one row per charge or refund, oldest first (``at``, ``kind``,
        ``job_id``, ``epsilon_spent`` at δ_B after the row, ``your_epsilon_spent``); the totals
        are in ``.attrs`` (``epsilon``, ``delta``)."""
        import pandas as pd

        path, query = f"/v1/datasets/{dataset_id}/budget/history", {"limit": 1000}
        response = self._send("GET", path, params=query)
        body = response.json()
        points = list(body.get("points", []))
        while cursor := response.headers.get(NEXT_CURSOR):  # one page per call: follow them
            response = self._send("GET", path, params={**query, "cursor": cursor})
            points += response.json().get("points", [])
        columns = ["at", "kind", "job_id", "epsilon_spent", "your_epsilon_spent"]
        frame = pd.DataFrame(points, columns=columns)
        frame["at"] = pd.to_datetime(frame["at"], utc=True, format="ISO8601")
        frame.attrs.update(
            {"dataset_id": body.get("dataset_id"), "epsilon": body.get("epsilon"), "delta": body.get("delta")}
        )
        return frame

    # --- jobs ---------------------------------------------------------------------------------

    def estimate(
        self,
        dataset_id: str,
        model: ModelArg = "logistic_regression",
        optimizer: OptimizerArg = None,
        *,
        epsilon: float,
        delta: float,
        **model_params: Any,
    ) -> Estimate:
        """Price a job without submitting it (nothing is charged)."""
        body = job_body(dataset_id, model, optimizer, epsilon, delta, **model_params)
        return Estimate(self._json("POST", "/v1/jobs/estimate", json=body, retry=True))

    def submit(
        self,
        dataset_id: str,
        model: ModelArg = "logistic_regression",
        optimizer: OptimizerArg = None,
        *,
        epsilon: float,
        delta: float,
        idempotency_key: str | None = None,
        **model_params: Any,
    ) -> Job:
        """Submit a job; the answer is queued and already charged. A fresh Idempotency-Key is
        made per call unless given; connection errors are retried with the same key."""
        body = job_body(dataset_id, model, optimizer, epsilon, delta, **model_params)
        key = idempotency_key or f"dpfit-{uuid.uuid4().hex}"
        data = self._json("POST", "/v1/jobs", json=body, headers={"Idempotency-Key": key}, retry=True)
        return Job(self, data)

    def fit(
        self,
        dataset_id: str,
        model: ModelArg = "logistic_regression",
        optimizer: OptimizerArg = None,
        *,
        epsilon: float,
        delta: float,
        progress: bool = True,
        idempotency_key: str | None = None,
        timeout: float | None = None,
        **model_params: Any,
    ) -> Model:
        """Submit, follow the job (with a progress bar unless ``progress=False``) and return the
        released :class:`Model`. Raises :class:`BudgetExceeded`, :class:`InvalidSpec`,
        :class:`NotFound`, :class:`AuthError` at submission and :class:`JobFailed` after."""
        job = self.submit(
            dataset_id,
            model,
            optimizer,
            epsilon=epsilon,
            delta=delta,
            idempotency_key=idempotency_key,
            **model_params,
        )
        return job.wait(progress=progress, timeout=timeout).model()

    def job(self, job_id: str) -> Job:
        return Job(self, self._json("GET", f"/v1/jobs/{job_id}"))

    def jobs(self, status: str | None = None) -> list[Job]:
        """Your jobs (admins: all), oldest first, optionally only those in ``status``."""
        return [Job(self, j) for j in self._pages("/v1/jobs", {"status": status})]

    def cancel(self, job_id: str) -> Job:
        return Job(self, self._json("POST", f"/v1/jobs/{job_id}/cancel", retry=True))

    # --- models -------------------------------------------------------------------------------

    def model(self, model_id: str) -> Model:
        """A released model (with the dataset's public label values for a binary label), bound
        to this client (for :meth:`Model.evaluate`)."""
        body = self._json("GET", f"/v1/models/{model_id}")
        label = None
        if body.get("classes") is None:
            label = self.dataset(str(body["dataset_id"])).get("label")
        return Model.from_json(body, label, client=self)

    def predict(self, model_id: str, rows: Any) -> dict[str, Any]:
        """The service's own prediction (``POST /v1/models/{id}/predict``) for ``rows``;
        :meth:`Model.predict` computes the same locally. The answer's ``warnings`` (values the
        encoding changed: undeclared categories, numbers outside the bounds, missing values)
        are also issued as one :class:`dpfit.PredictionWarning`."""
        body = {"rows": records(rows)}
        answer = dict(self._json("POST", f"/v1/models/{model_id}/predict", json=body, retry=True))
        warn_about_rows(list(answer.get("warnings") or []), answer.get("warnings_total"))
        return answer

    # --- private evaluation -------------------------------------------------------------------

    def estimate_evaluation(
        self,
        model_id: str,
        dataset_id: str,
        *,
        epsilon: float,
        delta: float,
        loss_clip: float | None = None,
    ) -> Estimate:
        """Price a private evaluation of the model on ``dataset_id`` without submitting it
        (nothing is charged): whether it is admissible, the ε spent after, and the ``plan`` with
        the noise standard deviation of every metric (``plan["hyperparameters"]["accuracy_std"]``
        …) and its ``warnings``."""
        body = evaluation_body(dataset_id, epsilon, delta, loss_clip)
        path = f"/v1/models/{model_id}/evaluate/estimate"
        return Estimate(self._json("POST", path, json=body, retry=True))

    def evaluate(
        self,
        model_id: str,
        dataset_id: str,
        *,
        epsilon: float,
        delta: float,
        loss_clip: float | None = None,
        wait: bool = True,
        timeout: float | None = None,
        idempotency_key: str | None = None,
    ) -> Evaluation:
        """Evaluate the model privately on ``dataset_id`` (a dataset you are granted with the
        model's schema: its training dataset or a holdout), charged (ε, δ) on that dataset's
        ledger when accepted. With ``wait`` (default) it is followed to its end and returned
        with its noised ``metrics`` (:class:`JobFailed` if it failed); otherwise returned
        queued. Raises :class:`BudgetExceeded`, :class:`InvalidSpec` (e.g. ``privacy.delta``: an
        evaluation needs δ > 0), :class:`NotFound` at submission. Like a job submission it
        carries an ``Idempotency-Key`` (fresh unless given) and is retried with it."""
        body = evaluation_body(dataset_id, epsilon, delta, loss_clip)
        key = idempotency_key or f"dpfit-{uuid.uuid4().hex}"
        data = self._json(
            "POST",
            f"/v1/models/{model_id}/evaluate",
            json=body,
            headers={"Idempotency-Key": key},
            retry=True,
        )
        evaluation = Evaluation(self, data)
        return evaluation.wait(timeout=timeout) if wait else evaluation

    def evaluation(self, model_id: str, evaluation_id: str) -> Evaluation:
        """An evaluation as it is now (``GET /v1/models/{id}/evaluations/{evaluation_id}``)."""
        path = f"/v1/models/{model_id}/evaluations/{evaluation_id}"
        return Evaluation(self, self._json("GET", path))

    def __repr__(self) -> str:
        return f"<dpfit.Client {self.url}>"
