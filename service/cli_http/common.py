"""What the HTTP commands share: exit codes, errors, output (text or ``-o json``), tables."""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Callable, Sequence
from typing import Any

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


#: ``leaf(parent, name, help)``: a command parser with the options every command takes.
Leaf = Callable[[Any, str, str], argparse.ArgumentParser]
#: A command: ``handler(client, args) -> exit code``.
Handler = Callable[[Any, argparse.Namespace], int]


class UsageError(Exception):
    """A bad argument found after parsing (a file that does not read, a malformed KEY=VALUE)."""


def fail(exc: Any, args: argparse.Namespace) -> None:
    """The error on stderr (text) or as JSON on stdout (``-o json``: the problem body)."""
    if args.output == "json":
        problem = dict(getattr(exc, "problem", {}) or {})
        problem.setdefault("title", getattr(exc, "title", None) or type(exc).__name__)
        problem.setdefault("detail", getattr(exc, "detail", str(exc)))
        job = getattr(exc, "job", None)
        if job is not None:
            problem["job"] = job.data
        print_json(problem)
    print(f"dpfit: {exc}", file=sys.stderr)


def print_json(value: Any) -> None:
    sys.stdout.write(json.dumps(value, indent=2, default=str, allow_nan=False) + "\n")


def show(args: argparse.Namespace, value: Any, text: Callable[[Any], str]) -> int:
    if args.output == "json":
        print_json(value)
    else:
        sys.stdout.write(text(value).rstrip("\n") + "\n")
    return EXIT_OK


def table(rows: Sequence[Sequence[Any]], header: Sequence[str]) -> str:
    cells = [[str(c) for c in header], *[["" if c is None else str(c) for c in r] for r in rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    lines = ("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in cells)
    return "\n".join(line.rstrip() for line in lines)


def pairs(values: Sequence[str], flag: str) -> dict[str, Any]:
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


def progress(args: argparse.Namespace) -> bool:
    return args.output == "text" and sys.stdout.isatty()


def estimate_lines(e: Any) -> list[str]:
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


def plain(value: Any) -> Any:
    if hasattr(value, "item"):
        value = value.item()
    return None if isinstance(value, float) and not math.isfinite(value) else value
