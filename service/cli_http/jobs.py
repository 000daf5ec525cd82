"""`dpfit jobs`: submit, estimate, list, show, cancel and watch jobs."""

from __future__ import annotations

import argparse
from typing import Any

from service.cli_http.common import (
    Handler,
    Leaf,
    UsageError,
    estimate_lines,
    pairs,
    progress,
    show,
    table,
)

DEFAULT_MODEL = "logistic_regression"  # as in the Python client's submit and estimate


def _job_request(args: argparse.Namespace) -> dict[str, Any]:
    params = pairs(args.model_param, "--model-param")
    if args.l2 is not None:
        params["l2"] = args.l2
    optimizer = None  # the service chooses (its `auto` optimizer)
    if args.param and not args.optimizer:
        raise UsageError("--param needs --optimizer NAME")
    if args.optimizer:
        optimizer = {"name": args.optimizer, "params": pairs(args.param, "--param")}
    return {
        "model": args.model,
        "optimizer": optimizer,
        "epsilon": args.epsilon,
        "delta": args.delta,
        **params,
    }


def _job_line(j: Any) -> list[Any]:
    step, total = j.progress
    return [
        j.id,
        j.data.get("dataset_id"),
        (j.data.get("model") or {}).get("type"),
        (j.data.get("optimizer") or {}).get("name"),
        j.status,
        f"{step}/{total}",
        j.model_id or _evaluates(j.data),
    ]


def _evaluates(data: dict[str, Any]) -> str:
    """``evaluates mdl_…`` for an evaluation job (it releases metrics, no model), else ``""``."""
    evaluated = _evaluated_model(data)
    return "" if evaluated is None else f"evaluates {evaluated}"


def _auto_text(plan: dict[str, Any]) -> str:
    """`` (chosen by auto; filled in: model.l2=…, …)`` when the service's ``auto`` optimizer
    chose (``plan["auto"]``), else ``""``."""
    record = plan.get("auto")
    if not isinstance(record, dict):
        return ""
    filled = record.get("filled") or {}
    values = ", ".join(
        f"{k}={v:.6g}" if isinstance(v, float) else f"{k}={v}" for k, v in filled.items()
    )
    multiclass = record.get("multiclass")  # "joint" or "one_vs_rest" for a categorical label
    chosen = " (chosen by auto"
    if multiclass:
        chosen += f"; classes fitted {str(multiclass).replace('_', '-')}"
    return chosen + (f"; filled in: {values})" if values else ")")


def _evaluated_model(data: dict[str, Any]) -> str | None:
    """The model an evaluation job evaluates (its optimizer is ``evaluation``), else None."""
    optimizer = data.get("optimizer") or {}
    if optimizer.get("name") != "evaluation":
        return None
    params = optimizer.get("params") or {}
    hyper = (data.get("plan") or {}).get("hyperparameters") or {}
    return str(params.get("model_id") or hyper.get("model_id") or "?")


def _job_text(j: Any) -> str:
    lines = [f"job {j.id}: {j.status}"]
    evaluated = _evaluated_model(j.data)
    keys = ["dataset", "model", "optimizer", "status", "progress", "model_id"]
    for key, value in zip(keys, _job_line(j)[1:], strict=True):
        if key == "optimizer" and evaluated is not None:
            lines.append(f"  kind: evaluation of model {evaluated} (noised metrics, no model)")
        elif key == "optimizer":
            lines.append(f"  optimizer: {value}{_auto_text(j.data.get('plan') or {})}")
        elif key == "model_id" and evaluated is not None:
            continue  # an evaluation releases metrics, never a model
        else:
            lines.append(f"  {key}: {value}")
    privacy = j.data.get("privacy") or {}
    lines.append(f"  privacy: ε={privacy.get('epsilon')} δ={privacy.get('delta')}")
    if j.error:
        lines.append(f"  error: {j.error}")
    if j.data.get("refunded"):
        lines.append("  refunded: yes")
    return "\n".join(lines)


def jobs_submit(client: Any, args: argparse.Namespace) -> int:
    request = _job_request(args)
    job = client.submit(args.dataset, idempotency_key=args.idempotency_key, **request)
    if not args.wait:
        return show(args, job.data, lambda _: job.id)
    if args.output == "text":
        print(job.id, flush=True)
    job.wait(progress=progress(args))
    return show(args, job.data, lambda _: job.model_id or "")


def jobs_estimate(client: Any, args: argparse.Namespace) -> int:
    estimate = client.estimate(args.dataset, **_job_request(args))

    def text(e: Any) -> str:
        plan = e.get("plan") or {}
        chosen = (plan.get("auto") or {}).get("optimizer") or (args.optimizer or "?")
        return "\n".join([*estimate_lines(e), f"optimizer: {chosen}{_auto_text(plan)}"])

    return show(args, dict(estimate), text)


def jobs_list(client: Any, args: argparse.Namespace) -> int:
    jobs = client.jobs(status=args.status)
    return show(
        args,
        [j.data for j in jobs],
        lambda _: (
            table(
                [_job_line(j) for j in jobs],
                ["ID", "DATASET", "MODEL", "OPTIMIZER", "STATUS", "STEP", "MODEL_ID"],
            )
            if jobs
            else "no jobs"
        ),
    )


def jobs_show(client: Any, args: argparse.Namespace) -> int:
    job = client.job(args.job)
    return show(args, job.data, lambda _: _job_text(job))


def jobs_cancel(client: Any, args: argparse.Namespace) -> int:
    job = client.cancel(args.job)
    return show(args, job.data, lambda _: _job_text(job))


def jobs_watch(client: Any, args: argparse.Namespace) -> int:
    job = client.job(args.job).wait(progress=progress(args))
    return show(args, job.data, lambda _: _job_text(job))


def add_commands(sub: Any, leaf: Leaf, group: argparse.ArgumentParser) -> None:
    """Add ``jobs`` to the CLI's subparsers."""
    jobs = sub.add_parser(
        "jobs", help="submit, estimate, list, show, cancel and watch jobs", parents=[group]
    )
    js = jobs.add_subparsers(dest="action", required=True)
    for name, help in (
        ("submit", "submit a job (prints its id; with --wait, the model id)"),
        ("estimate", "price a job without submitting it"),
    ):
        p = leaf(js, name, help)
        p.add_argument("--dataset", required=True)
        p.add_argument(
            "--model",
            default=DEFAULT_MODEL,
            help=f"model type (default {DEFAULT_MODEL}, as in the Python client), e.g. "
            "huber_svm, huber_regression",
        )
        p.add_argument("--l2", type=float, help="L2 regularisation of the model")
        p.add_argument(
            "--model-param",
            action="append",
            default=[],
            metavar="KEY=VALUE",
            help="another model parameter (VALUE is JSON, else text); repeatable",
        )
        p.add_argument("--optimizer", help="optimizer name (default: the service's choice)")
        p.add_argument(
            "--param",
            action="append",
            default=[],
            metavar="KEY=VALUE",
            help="an optimizer parameter (VALUE is JSON, else text); repeatable",
        )
        p.add_argument("--epsilon", type=float, required=True)
        p.add_argument("--delta", type=float, required=True)
        if name == "submit":
            p.add_argument("--wait", action="store_true", help="follow the job to its end")
            p.add_argument("--idempotency-key", help="default: a fresh one (retries reuse it)")
    p = leaf(js, "list", "your jobs")
    p.add_argument("--status", choices=("queued", "running", "succeeded", "failed", "cancelled"))
    leaf(js, "show", "one job").add_argument("job")
    leaf(js, "cancel", "cancel a queued or running job").add_argument("job")
    leaf(js, "watch", "follow a job to its end").add_argument("job")


HANDLERS: dict[tuple[str, str | None], Handler] = {
    ("jobs", "submit"): jobs_submit,
    ("jobs", "estimate"): jobs_estimate,
    ("jobs", "list"): jobs_list,
    ("jobs", "show"): jobs_show,
    ("jobs", "cancel"): jobs_cancel,
    ("jobs", "watch"): jobs_watch,
}
