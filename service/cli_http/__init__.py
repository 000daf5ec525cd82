"""`dpfit datasets | jobs | models | budget`: the service's HTTP API for people, in a terminal.

These commands are clients like any other: they talk to ``$DPFIT_URL`` (default
``http://127.0.0.1:8000``) with ``$DPFIT_API_KEY`` through the ``dpfit`` Python client
(``sdk/python``; ``make install`` installs it), so errors, paging, waiting and prediction behave
exactly as in Python. They never open the database.

Every command takes ``-o json`` (one JSON document on stdout, for scripts) and otherwise prints
text; ``-o`` goes before the command (``dpfit -o json jobs list``), after its group
(``dpfit jobs -o json list``) or after the command (``dpfit jobs list -o json``). While
waiting, a progress bar is drawn on stderr when stdout is a terminal.

Exit codes (:data:`EXIT_CODES`): 0 ok, 1 other error (service unreachable, 5xx), 2 usage,
3 not found, 4 invalid request or spec, 5 budget exceeded, 6 authentication/authorisation,
7 job failed or cancelled, 8 other conflict (already registered, retired, already finished).
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import pickle
import re
import sys
import warnings
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import yaml

EXIT_OK, EXIT_ERROR, EXIT_USAGE = 0, 1, 2
EXIT_NOT_FOUND, EXIT_INVALID, EXIT_BUDGET, EXIT_AUTH, EXIT_JOB_FAILED, EXIT_CONFLICT = (
    3,
    4,
    5,
    6,
    7,
    8,
)
EXIT_CODES = {
    EXIT_OK: "ok",
    EXIT_ERROR: "other error (service unreachable, server error)",
    EXIT_USAGE: "usage error",
    EXIT_NOT_FOUND: "not found (or not visible to this key)",
    EXIT_INVALID: "invalid request or spec (the field at fault is named)",
    EXIT_BUDGET: "budget exceeded (what remains is named)",
    EXIT_AUTH: "no key, unknown or revoked key, or a role that may not do this",
    EXIT_JOB_FAILED: "the job failed or was cancelled",
    EXIT_CONFLICT: "other conflict (already registered, retired, already finished)",
}
COMMANDS = ("datasets", "jobs", "models", "budget")


# --- the parser ------------------------------------------------------------------------------


DEFAULT_MODEL = "logistic_regression"  # as in the Python client's submit and estimate


def add_output_option(parser: argparse.ArgumentParser) -> None:
    """``-o/--output text|json`` on ``parser``. Its default is *suppressed*, so that the option
    may be given at any level (``dpfit -o json jobs list``, ``dpfit jobs -o json list``,
    ``dpfit jobs list -o json``): a level where it is absent leaves what an outer level set
    (argparse copies a subparser's defaults over the outer namespace). :func:`run` reads
    ``text`` when no level gave it."""
    parser.add_argument(
        "-o",
        "--output",
        choices=("text", "json"),
        default=argparse.SUPPRESS,
        help="output format of the HTTP commands (default text); before or after the command",
    )


def add_http_commands(sub: Any) -> None:
    """Add ``datasets``, ``jobs``, ``models`` and ``budget`` to the CLI's subparsers."""
    common = argparse.ArgumentParser(add_help=False)
    add_output_option(common)
    common.add_argument("--url", help="service URL (default $DPFIT_URL, else 127.0.0.1:8000)")
    group = argparse.ArgumentParser(add_help=False)
    add_output_option(group)

    def leaf(parent: Any, name: str, help: str) -> argparse.ArgumentParser:
        parser: argparse.ArgumentParser = parent.add_parser(name, help=help, parents=[common])
        return parser

    datasets = sub.add_parser(
        "datasets",
        help="list, show, register and withdraw datasets; grant, list and revoke grants",
        parents=[group],
    )
    ds = datasets.add_subparsers(dest="action", required=True)
    leaf(ds, "list", "datasets you own or were granted")
    leaf(ds, "show", "one dataset").add_argument("dataset")
    p = leaf(ds, "register", "register a dataset from a YAML or JSON spec (owners)")
    p.add_argument("spec", type=Path, help="the body of POST /v1/datasets as YAML or JSON")
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="validate only: show the validation report and whether it would register, "
        "create nothing (exit 4 if it would be refused)",
    )
    leaf(
        ds, "withdraw", "withdraw a dataset no job was ever submitted on (owners, admins)"
    ).add_argument("dataset")
    p = leaf(ds, "grant", "let an analyst submit jobs on a dataset (owners)")
    p.add_argument("dataset")
    p.add_argument("principal")
    p.add_argument("--epsilon-cap", type=float, help="at most this ε for the analyst")
    leaf(
        ds, "grants", "who may submit jobs on a dataset, with caps and ε spent (owners)"
    ).add_argument("dataset")
    p = leaf(ds, "revoke", "revoke an analyst's grant: new jobs stop, accounting stays (owners)")
    p.add_argument("dataset")
    p.add_argument("principal")

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

    models = sub.add_parser(
        "models",
        help="show, predict with, evaluate privately and export released models",
        parents=[group],
    )
    ms = models.add_subparsers(dest="action", required=True)
    leaf(ms, "show", "a released model").add_argument("model")
    p = leaf(ms, "predict", "predict the rows of a CSV file (header = the raw schema)")
    p.add_argument("model")
    p.add_argument("rows", type=Path)
    p.add_argument("--local", action="store_true", help="compute locally from the public encoding")
    p = leaf(ms, "evaluate", "noised metrics of a model on a dataset (charged on its ledger)")
    p.add_argument("model")
    p.add_argument(
        "--dataset", required=True, help="a dataset with the model's schema (training or holdout)"
    )
    p.add_argument("--epsilon", type=float, required=True)
    p.add_argument("--delta", type=float, required=True, help="must be > 0 (Gaussian noise)")
    p.add_argument(
        "--loss-clip", type=float, help="clip B of each row's loss (default: nothing clipped)"
    )
    p.add_argument(
        "--estimate", action="store_true", help="only price it: nothing is charged or run"
    )
    p = leaf(ms, "export", "write the model as JSON or as a pickled scikit-learn Pipeline")
    p.add_argument("model")
    p.add_argument("--format", choices=("json", "sklearn"), required=True)
    p.add_argument("--file", type=Path, help="output file (required for sklearn)")

    p = leaf(sub, "budget", "what is spent and what remains of a dataset's budget")
    p.add_argument("dataset")
    p.add_argument("--history", action="store_true", help="the burn-down, one line per charge")


# --- running ---------------------------------------------------------------------------------


def run(args: argparse.Namespace) -> int:
    """Run one HTTP command; returns its exit code (see the module docstring)."""
    try:
        import dpfit
    except ImportError:
        print(
            "dpfit: the HTTP commands need the dpfit client: pip install ./sdk/python",
            file=sys.stderr,
        )
        return EXIT_USAGE
    if not hasattr(args, "output"):  # no level was given -o (see add_output_option)
        args.output = "text"
    handler = _HANDLERS[(args.command, getattr(args, "action", None))]
    try:
        with dpfit.Client(url=args.url) as client:
            result = handler(client, args)
    except dpfit.JobFailed as exc:
        _fail(exc, args)
        return EXIT_JOB_FAILED
    except dpfit.BudgetExceeded as exc:
        _fail(exc, args)
        return EXIT_BUDGET
    except dpfit.Conflict as exc:
        _fail(exc, args)
        return EXIT_CONFLICT
    except dpfit.InvalidSpec as exc:
        _fail(exc, args)
        return EXIT_INVALID
    except dpfit.NotFound as exc:
        _fail(exc, args)
        return EXIT_NOT_FOUND
    except dpfit.AuthError as exc:
        _fail(exc, args)
        return EXIT_AUTH
    except dpfit.DpfitError as exc:
        _fail(exc, args)
        return EXIT_ERROR
    except UsageError as exc:
        print(f"dpfit: {exc}", file=sys.stderr)
        return EXIT_USAGE
    return result


class UsageError(Exception):
    """A bad argument found after parsing (a file that does not read, a malformed KEY=VALUE)."""


def _fail(exc: Any, args: argparse.Namespace) -> None:
    """The error on stderr (text) or as JSON on stdout (``-o json``: the problem body)."""
    if args.output == "json":
        problem = dict(getattr(exc, "problem", {}) or {})
        problem.setdefault("title", getattr(exc, "title", None) or type(exc).__name__)
        problem.setdefault("detail", getattr(exc, "detail", str(exc)))
        job = getattr(exc, "job", None)
        if job is not None:
            problem["job"] = job.data
        _print_json(problem)
    print(f"dpfit: {exc}", file=sys.stderr)


def _print_json(value: Any) -> None:
    sys.stdout.write(json.dumps(value, indent=2, default=str, allow_nan=False) + "\n")


def _show(args: argparse.Namespace, value: Any, text: Callable[[Any], str]) -> int:
    if args.output == "json":
        _print_json(value)
    else:
        sys.stdout.write(text(value).rstrip("\n") + "\n")
    return EXIT_OK


def _table(rows: Sequence[Sequence[Any]], header: Sequence[str]) -> str:
    cells = [[str(c) for c in header], *[["" if c is None else str(c) for c in r] for r in rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    lines = ("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in cells)
    return "\n".join(line.rstrip() for line in lines)


def _pairs(values: Sequence[str], flag: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in values:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise UsageError(f"{flag} expects KEY=VALUE, got {item!r}")
        try:
            out[key] = json.loads(raw)
        except ValueError:
            out[key] = raw
    return out


# --- datasets --------------------------------------------------------------------------------


def _dataset_line(d: dict[str, Any]) -> list[Any]:
    budget = d.get("budget") or {}
    return [
        d["id"],
        d.get("name"),
        d.get("owner"),
        d.get("n_rows"),
        f"ε={budget.get('epsilon')} δ={budget.get('delta')}",
        "retired" if d.get("retired_at") else "",
    ]


def datasets_list(client: Any, args: argparse.Namespace) -> int:
    return _show(
        args,
        client.datasets(),
        lambda items: (
            _table([_dataset_line(d) for d in items], ["ID", "NAME", "OWNER", "ROWS", "BUDGET", ""])
            if items
            else "no datasets"
        ),
    )


def _dataset_text(d: dict[str, Any]) -> str:
    lines = [
        f"{k}: {v}"
        for k, v in zip(
            ["id", "name", "owner", "rows", "budget", ""], _dataset_line(d), strict=True
        )
        if k
    ]
    lines.append(f"label: {json.dumps(d.get('label'))}")
    lines.append("features:")
    lines += [f"  {json.dumps(f)}" for f in d.get("features") or []]
    if d.get("source"):
        lines.append(f"source: {d['source'].get('uri')}")
    lines += _validation_lines(d.get("validation"))
    return "\n".join(lines)


def _validation_lines(report: Any) -> list[str]:
    """The registration's validation report (owners and admins see it): every non-zero count of
    the label column and of each feature, or that there were none. A common slip it shows: a
    typo in a declared label value or category (``outside_declared``, ``unknown_category``)."""
    if not isinstance(report, dict):
        return []
    rows = report.get("rows")
    found = []
    label = report.get("label") or {}
    for key, count in label.items():
        if key != "column" and count:
            found.append(f"  label {label.get('column')}: {key} {count}/{rows}")
    for feature in report.get("features") or []:
        name = feature.get("name")
        found += [f"  {name}: {k} {v}/{rows}" for k, v in feature.items() if k != "name" and v]
    head = "cells the encoding changed:" if found else "every cell as declared"
    return [f"validation: {head}", *found]


def datasets_show(client: Any, args: argparse.Namespace) -> int:
    return _show(args, client.dataset(args.dataset), _dataset_text)


# A number is a float as in JSON: PyYAML follows YAML 1.1, where a float needs a dot, so
# `delta: 1e-5` (no dot) was the *string* "1e-5" and the service answered 422 "budget.delta:
# Input should be a valid number". Here `1e-5`, `1E5`, `-3e+2`, `.5`, `-.5`, `1.` and `2.5e-3` are
# floats (plus YAML 1.1's own: `1_000.5`, sexagesimal `1:30.5`, `.inf`, `.nan`); integers,
# booleans, nulls, dates and strings resolve exactly as with yaml.SafeLoader.
_FLOAT = re.compile(
    r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+]?[0-9]+)?
    |[-+]?(?:[0-9][0-9_]*)(?:[eE][-+]?[0-9]+)
    |[-+]?\.[0-9_]+(?:[eE][-+]?[0-9]+)?
    |[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+\.[0-9_]*
    |[-+]?\.(?:inf|Inf|INF)
    |\.(?:nan|NaN|NAN))$""",
    re.X,
)
_FLOAT_TAG = "tag:yaml.org,2002:float"


class SpecLoader(yaml.SafeLoader):
    """yaml.SafeLoader whose float resolver also reads JSON's numbers (``1e-5``) as floats. Its
    own copy of the resolvers: yaml.SafeLoader and every other loader are left unchanged."""


# The float resolver replaced where it stands (same first characters, same precedence).
SpecLoader.yaml_implicit_resolvers = {
    first: [(tag, _FLOAT if tag == _FLOAT_TAG else regexp) for tag, regexp in resolvers]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


# YAML 1.1 (PyYAML) reads unquoted yes/no/on/off (and their capitalised forms) as booleans, so
# `positive: yes` declared the label value True and every "yes" cell fell outside it. In the
# values a cell is compared with — the label's positive/negative/classes and the categorical
# features' categories — a plain scalar that YAML 1.1 alone makes a boolean is read as the text
# typed; true/false stay booleans (JSON and YAML 1.2 agree on them).
_BOOL_TAG = "tag:yaml.org,2002:bool"
_STR_TAG = "tag:yaml.org,2002:str"
_TYPED_AS_TEXT = ("positive", "negative", "classes", "categories")


def _value_nodes(node: yaml.Node | None) -> Iterator[yaml.ScalarNode]:
    """The scalar nodes of the label's positive/negative/classes and each feature's categories
    in a spec document's node tree (other nodes are left as YAML reads them)."""
    if not isinstance(node, yaml.MappingNode):
        return
    for key, value in node.value:
        if not isinstance(key, yaml.ScalarNode):
            continue
        if key.value == "label":
            yield from _label_values(value)
        elif key.value == "features" and isinstance(value, yaml.SequenceNode):
            for feature in value.value:
                yield from _label_values(feature)


def _label_values(node: yaml.Node) -> Iterator[yaml.ScalarNode]:
    if not isinstance(node, yaml.MappingNode):
        return
    for key, value in node.value:
        if not (isinstance(key, yaml.ScalarNode) and key.value in _TYPED_AS_TEXT):
            continue
        items = value.value if isinstance(value, yaml.SequenceNode) else [value]
        yield from (item for item in items if isinstance(item, yaml.ScalarNode))


def _typed_text(node: yaml.ScalarNode) -> bool:
    """A plain (unquoted) scalar resolved as a boolean from a YAML 1.1-only word."""
    return (
        node.tag == _BOOL_TAG and node.style is None and node.value.lower() not in ("true", "false")
    )


def load_spec(text: str) -> Any:
    """A spec file's document (YAML, so JSON too), with :class:`SpecLoader`; in label values
    and categories, ``yes``/``no``/``on``/``off`` stay the text typed (see above)."""
    loader = SpecLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        for scalar in _value_nodes(node):
            if _typed_text(scalar):
                scalar.tag = _STR_TAG
        return loader.construct_document(node)
    finally:
        loader.dispose()


def _read_spec(path: Path) -> dict[str, Any]:
    try:
        spec = load_spec(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise UsageError(f"cannot read {path}: {type(exc).__name__}") from None
    if not isinstance(spec, dict):
        raise UsageError(f"{path} must hold a mapping (the body of POST /v1/datasets)")
    return spec


def datasets_register(client: Any, args: argparse.Namespace) -> int:
    spec = _read_spec(args.spec)
    if getattr(args, "dry_run", False):
        return _show_check(args, client.validate_dataset(spec))
    return _show(args, client.register_dataset(spec), _dataset_text)


def _check_text(check: dict[str, Any]) -> str:
    refusal = check.get("refusal") or {}
    verdict = (
        "would register: yes (dry run, nothing created)"
        if check.get("would_register")
        else f"would register: no — {refusal.get('field')}: {refusal.get('detail')}"
    )
    lines = [
        verdict,
        f"rows: {check.get('n_rows')}",
        f"encoded features: {check.get('n_features')}",
    ]
    return "\n".join(lines + _validation_lines(check.get("validation")))


def _show_check(args: argparse.Namespace, check: dict[str, Any]) -> int:
    """The dry run's report; exit 4 (invalid) when the registration would be refused."""
    _show(args, check, _check_text)
    return EXIT_OK if check.get("would_register") else EXIT_INVALID


def datasets_withdraw(client: Any, args: argparse.Namespace) -> int:
    return _show(
        args,
        client.withdraw_dataset(args.dataset),
        lambda w: f"withdrawn: {w['dataset_id']} ({w['name']}); its source may be registered again",
    )


def datasets_grant(client: Any, args: argparse.Namespace) -> int:
    grant = client.grant(args.dataset, args.principal, args.epsilon_cap)
    cap = grant.get("epsilon_cap")
    return _show(
        args,
        grant,
        lambda g: (
            f"granted {g['principal']} on {g['dataset_id']}"
            + (f" (ε cap {cap})" if cap is not None else "")
        ),
    )


def datasets_grants(client: Any, args: argparse.Namespace) -> int:
    frame = client.grants(args.dataset)
    records = [
        {
            "dataset_id": r["dataset_id"],
            "principal": r["principal"],
            "epsilon_cap": None if math.isnan(r["epsilon_cap"]) else float(r["epsilon_cap"]),
            "created_at": r["created_at"].isoformat(),
            "epsilon_spent": float(r["epsilon_spent"]),
        }
        for r in frame.to_dict("records")
    ]

    def text(items: list[dict[str, Any]]) -> str:
        if not items:
            return f"no grants on {args.dataset}"
        return _table(
            [
                [
                    g["principal"],
                    g["created_at"][:19].replace("T", " "),
                    "none" if g["epsilon_cap"] is None else f"{g['epsilon_cap']:.6g}",
                    f"{g['epsilon_spent']:.6g}",
                ]
                for g in items
            ],
            ["PRINCIPAL", "GRANTED (UTC)", "ε CAP", "ε SPENT"],
        )

    return _show(args, records, text)


def datasets_revoke(client: Any, args: argparse.Namespace) -> int:
    revoked = client.revoke_grant(args.dataset, args.principal)
    return _show(
        args,
        revoked,
        lambda g: (
            f"revoked {g['principal']} on {g['dataset_id']}: new jobs are refused; jobs already "
            "admitted keep running and the ledger is unchanged"
        ),
    )


# --- jobs ------------------------------------------------------------------------------------


def _job_request(args: argparse.Namespace) -> dict[str, Any]:
    params = _pairs(args.model_param, "--model-param")
    if args.l2 is not None:
        params["l2"] = args.l2
    optimizer = None  # the service chooses (its `auto` optimizer)
    if args.param and not args.optimizer:
        raise UsageError("--param needs --optimizer NAME")
    if args.optimizer:
        optimizer = {"name": args.optimizer, "params": _pairs(args.param, "--param")}
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


def _progress(args: argparse.Namespace) -> bool:
    return args.output == "text" and sys.stdout.isatty()


def jobs_submit(client: Any, args: argparse.Namespace) -> int:
    request = _job_request(args)
    job = client.submit(args.dataset, idempotency_key=args.idempotency_key, **request)
    if not args.wait:
        return _show(args, job.data, lambda _: job.id)
    if args.output == "text":
        print(job.id, flush=True)
    job.wait(progress=_progress(args))
    return _show(args, job.data, lambda _: job.model_id or "")


def jobs_estimate(client: Any, args: argparse.Namespace) -> int:
    estimate = client.estimate(args.dataset, **_job_request(args))

    def text(e: Any) -> str:
        plan = e.get("plan") or {}
        chosen = (plan.get("auto") or {}).get("optimizer") or (args.optimizer or "?")
        return "\n".join([*_estimate_lines(e), f"optimizer: {chosen}{_auto_text(plan)}"])

    return _show(args, dict(estimate), text)


def _estimate_lines(e: Any) -> list[str]:
    """The verdict, the ε after, and the mechanism of an estimate (a job's or an evaluation's)."""
    verdict = "admissible" if e.get("admissible") else "NOT admissible"
    asked = e.get("privacy") or {}
    budget = e.get("budget") or {"epsilon": e.get("epsilon"), "delta": e.get("delta")}
    return [
        f"{verdict}: {e.get('reason')}",
        f"this job: ε={asked.get('epsilon')} δ={asked.get('delta')}",
        f"budget ε spent after: {e.get('epsilon_spent_after')}  "
        f"remaining after: {e.get('epsilon_remaining_after')}  (of the dataset's "
        f"ε_B={budget.get('epsilon')}, δ_B={budget.get('delta')})",
        f"mechanism: {e.get('mechanism')}  noise scale: {e.get('noise_scale')}  "
        f"sensitivity: {e.get('sensitivity')}  steps: {e.get('steps')}",
    ]


def jobs_list(client: Any, args: argparse.Namespace) -> int:
    jobs = client.jobs(status=args.status)
    return _show(
        args,
        [j.data for j in jobs],
        lambda _: (
            _table(
                [_job_line(j) for j in jobs],
                ["ID", "DATASET", "MODEL", "OPTIMIZER", "STATUS", "STEP", "MODEL_ID"],
            )
            if jobs
            else "no jobs"
        ),
    )


def jobs_show(client: Any, args: argparse.Namespace) -> int:
    job = client.job(args.job)
    return _show(args, job.data, lambda _: _job_text(job))


def jobs_cancel(client: Any, args: argparse.Namespace) -> int:
    job = client.cancel(args.job)
    return _show(args, job.data, lambda _: _job_text(job))


def jobs_watch(client: Any, args: argparse.Namespace) -> int:
    job = client.job(args.job).wait(progress=_progress(args))
    return _show(args, job.data, lambda _: _job_text(job))


# --- models ----------------------------------------------------------------------------------


def _model_text(m: Any) -> str:
    p = m.privacy
    lines = [
        f"model {m.id} ({m.type}) from job {m.job_id} on {m.dataset_id}",
        f"privacy: ε={p.get('epsilon')} δ={p.get('delta')} mechanism={p.get('mechanism')} "
        f"noise scale={p.get('noise_scale')} sensitivity={p.get('sensitivity')}",
    ]
    names = m.feature_names + (["(intercept)"] if m.intercept is not None else [])
    weights = m.weights()
    header = ["FEATURE", *([str(c) for c in m.classes] if m.is_multiclass else ["WEIGHT"])]
    rows = [[name, *(f"{w:+.6f}" for w in weights[:, i])] for i, name in enumerate(names)]
    return "\n".join(lines) + "\n" + _table(rows, header)


def models_show(client: Any, args: argparse.Namespace) -> int:
    model = client.model(args.model)
    return _show(args, model.to_json(), lambda _: _model_text(model))


def _read_rows(path: Path) -> list[dict[str, str]]:
    """CSV rows as text cells (the service converts each cell by its declared type). UTF-8,
    with a leading byte-order mark dropped (``utf-8-sig``: spreadsheets write one, and it would
    otherwise stay in the first column's name)."""
    try:
        with path.open(newline="", encoding="utf-8-sig") as handle:
            reader = csv.DictReader(handle)
            header = reader.fieldnames or []
            repeated = sorted({name for name in header if header.count(name) > 1})
            if repeated:  # DictReader would keep the last of them silently
                raise UsageError(f"{path}: the header names {', '.join(repeated)} more than once")
            return list(reader)
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise UsageError(f"cannot read {path}: {type(exc).__name__}") from None


def models_predict(client: Any, args: argparse.Namespace) -> int:
    rows = _read_rows(args.rows)
    if not rows:
        raise UsageError(f"{args.rows} has no rows")
    import dpfit

    with warnings.catch_warnings():  # shown below, from the answer, once
        warnings.simplefilter("ignore", dpfit.PredictionWarning)
        if args.local:
            answer = _predict_locally(client, args.model, rows)
        else:
            answer = client.predict(args.model, rows)
    if args.output != "json":
        _print_prediction_warnings(answer)
    probabilities = answer.get("probabilities")
    return _show(
        args,
        answer,
        lambda a: _table(
            [
                [i, p, "" if probabilities is None else f"{probabilities[i]:.6f}"]
                for i, p in enumerate(a["predictions"])
            ],
            ["ROW", "PREDICTION", "SCORE"],
        ),
    )


def _print_prediction_warnings(answer: dict[str, Any]) -> None:
    """The answer's ``warnings`` on stderr (the table stays on stdout), one line each: the row
    (0-based, as in the ROW column), the column, what the encoding did."""
    listed = answer.get("warnings") or []
    total = int(answer.get("warnings_total") or len(listed))
    for w in listed:
        sys.stderr.write(f"warning: row {w['row']} {w['column']}: {w['message']}\n")
    if total > len(listed):
        sys.stderr.write(f"warning: … and {total - len(listed)} more (--output json lists them)\n")


def _predict_locally(client: Any, model_id: str, rows: list[dict[str, str]]) -> dict[str, Any]:
    """What ``POST /v1/models/{id}/predict`` answers, computed from the public encoding. Rows
    the encoding refuses (a missing feature column, …) raise ``dpfit.InvalidSpec`` on field
    ``rows`` — as the service's 422 does — so the CLI reports them as invalid input (exit 4); a
    model this client cannot read (e.g. a newer encoding) raises ``dpfit.DpfitError`` (exit 1).
    Never a traceback."""
    import dpfit

    try:
        model = client.model(model_id)
    except (ValueError, TypeError) as exc:
        raise dpfit.DpfitError(f"model {model_id} cannot be used locally: {exc}") from None
    try:
        predictions = model.predict(rows)
        answer: dict[str, Any] = {"predictions": [_plain(v) for v in predictions]}
        if model.is_regression:
            answer["probabilities"] = None
        else:
            proba = model.predict_proba(rows)
            best = proba.max(axis=1) if model.is_multiclass else proba[:, 1]
            answer["probabilities"] = [float(v) for v in best]
        answer["warnings"] = model.prediction_warnings(rows)
        answer["warnings_total"] = len(answer["warnings"])
    except (ValueError, TypeError, ArithmeticError) as exc:
        problem = {"title": "Invalid rows", "field": "rows", "detail": str(exc)}
        raise dpfit.InvalidSpec(
            str(exc), title="Invalid rows", field="rows", problem=problem
        ) from None
    return answer


def _metric_text(name: str, value: Any, std: float | None) -> str:
    noise = "" if std is None else f"  (noise std {std:.4g})"
    if isinstance(value, dict):  # the confusion matrix: counts, std per cell
        cells = "  ".join(f"{k}={v:.1f}" for k, v in value.items())
        return f"{name}: {cells}{noise.replace('std', 'std per cell')}"
    return f"{name}: {value:.4f}{noise}" if isinstance(value, float) else f"{name}: {value}"


def _stds(plan: dict[str, Any]) -> dict[str, float]:
    hyper = plan.get("hyperparameters") or {}
    return {k.removesuffix("_std"): float(v) for k, v in hyper.items() if k.endswith("_std")}


def models_evaluate(client: Any, args: argparse.Namespace) -> int:
    request = {"epsilon": args.epsilon, "delta": args.delta, "loss_clip": args.loss_clip}
    if args.estimate:
        estimate = client.estimate_evaluation(args.model, args.dataset, **request)

        def priced(e: Any) -> str:
            plan = e.get("plan") or {}
            lines = _estimate_lines(e)
            lines += [f"{name} noise std: {std:.4g}" for name, std in _stds(plan).items()]
            lines += [f"warning: {w}" for w in plan.get("warnings") or []]
            return "\n".join(lines)

        return _show(args, dict(estimate), priced)
    evaluation = client.evaluate(args.model, args.dataset, wait=False, **request)
    if args.output == "text":
        print(evaluation.id, flush=True)
    evaluation.wait()

    def text(e: Any) -> str:
        stds = evaluation.stds
        privacy = evaluation.privacy
        lines = [
            f"evaluation {evaluation.id} of model {evaluation.model_id} on "
            f"{evaluation.dataset_id}: {evaluation.status} (ε={privacy.get('epsilon')} "
            f"δ={privacy.get('delta')}); noised metrics:"
        ]
        metrics = evaluation.metrics or {}
        lines += [f"  {_metric_text(k, v, stds.get(k))}" for k, v in metrics.items()]
        lines += [f"warning: {w}" for w in evaluation.warnings]
        return "\n".join(lines)

    return _show(args, evaluation.data, text)


def _plain(value: Any) -> Any:
    if hasattr(value, "item"):
        value = value.item()
    return None if isinstance(value, float) and not math.isfinite(value) else value


def models_export(client: Any, args: argparse.Namespace) -> int:
    model = client.model(args.model)
    if args.format == "json":
        if args.file is None:
            _print_json(model.to_json())
            return EXIT_OK
        args.file.write_text(json.dumps(model.to_json(), indent=2) + "\n")
    else:
        if args.file is None:
            raise UsageError("--format sklearn writes a pickle: give --file PATH")
        try:
            pipeline = model.to_sklearn()
        except ImportError:
            raise UsageError(
                "--format sklearn needs scikit-learn: pip install scikit-learn"
            ) from None
        args.file.write_bytes(pickle.dumps(pipeline))
    return _show(
        args,
        {"model_id": model.id, "format": args.format, "file": str(args.file)},
        lambda r: f"wrote {r['file']} ({r['format']})",
    )


# --- budget ----------------------------------------------------------------------------------

_BAR = 40


def _burn(spent: float, total: float) -> str:
    used = 0 if total <= 0 else min(_BAR, round(_BAR * spent / total))
    return "█" * used + "·" * (_BAR - used)


def budget(client: Any, args: argparse.Namespace) -> int:
    frame = client.budget(args.dataset)
    row = frame.iloc[0].to_dict()
    value: dict[str, Any] = {k: _plain(v) for k, v in row.items()}
    history = None
    if args.history:
        history = client.budget_history(args.dataset)
        value["history"] = [
            {
                "at": r["at"].isoformat(),
                "kind": r["kind"],
                # another analyst's row has no job id: JSON null (pandas reads it as NaN)
                "job_id": r["job_id"] if isinstance(r["job_id"], str) else None,
                "epsilon_spent": float(r["epsilon_spent"]),
                "your_epsilon_spent": float(r["your_epsilon_spent"]),
            }
            for r in history.to_dict(orient="records")
        ]

    def text(v: dict[str, Any]) -> str:
        eps, spent = float(v["epsilon"]), float(v["epsilon_spent"])
        lines = [
            f"dataset {v['dataset_id']}: ε_B={eps} δ_B={v['delta']}",
            f"spent     ε={spent:.4f}  [{_burn(spent, eps)}]",
            f"remaining ε={float(v['epsilon_remaining']):.4f}  over {v['jobs_charged']} job(s)",
        ]
        if v.get("your_epsilon_cap") is not None or v.get("your_epsilon_spent"):
            lines.append(
                f"yours     ε={float(v.get('your_epsilon_spent') or 0):.4f}"
                + (
                    f" of a cap of {v['your_epsilon_cap']}"
                    if v.get("your_epsilon_cap") is not None
                    else ""
                )
            )
        for point in v.get("history") or []:
            # epsilon_spent is the dataset's running total after this row, not the row's own
            lines.append(
                f"{point['at'][:19]}  {point['kind']:<6} {point['job_id'] or '(another)':<24}"
                f" ε spent after: {point['epsilon_spent']:.4f}"
                f" [{_burn(point['epsilon_spent'], eps)}]"
            )
        return "\n".join(lines)

    return _show(args, value, text)


_HANDLERS: dict[tuple[str, str | None], Callable[[Any, argparse.Namespace], int]] = {
    ("datasets", "list"): datasets_list,
    ("datasets", "show"): datasets_show,
    ("datasets", "register"): datasets_register,
    ("datasets", "withdraw"): datasets_withdraw,
    ("datasets", "grant"): datasets_grant,
    ("datasets", "grants"): datasets_grants,
    ("datasets", "revoke"): datasets_revoke,
    ("jobs", "submit"): jobs_submit,
    ("jobs", "estimate"): jobs_estimate,
    ("jobs", "list"): jobs_list,
    ("jobs", "show"): jobs_show,
    ("jobs", "cancel"): jobs_cancel,
    ("jobs", "watch"): jobs_watch,
    ("models", "show"): models_show,
    ("models", "predict"): models_predict,
    ("models", "evaluate"): models_evaluate,
    ("models", "export"): models_export,
    ("budget", None): budget,
}
