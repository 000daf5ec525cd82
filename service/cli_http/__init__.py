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
import sys
from typing import Any

from service.cli_http import budget, datasets, jobs, models
from service.cli_http.common import (
    EXIT_AUTH,
    EXIT_BUDGET,
    EXIT_CONFLICT,
    EXIT_ERROR,
    EXIT_INVALID,
    EXIT_JOB_FAILED,
    EXIT_NOT_FOUND,
    EXIT_USAGE,
    Handler,
    UsageError,
    fail,
)

COMMANDS = ("datasets", "jobs", "models", "budget")
#: One module per noun, in the order ``dpfit --help`` lists them.
NOUNS = (datasets, jobs, models, budget)


# --- the parser ------------------------------------------------------------------------------


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

    for noun in NOUNS:
        noun.add_commands(sub, leaf, group)


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
    except dpfit.DpfitError as exc:
        fail(exc, args)
        return _exit_code(exc)
    except UsageError as exc:
        print(f"dpfit: {exc}", file=sys.stderr)
        return EXIT_USAGE
    return result


def _exit_code(exc: Exception) -> int:
    """The exit code of a client error: the first kind in this order that it is."""
    import dpfit

    kinds: tuple[tuple[type[Exception], int], ...] = (
        (dpfit.JobFailed, EXIT_JOB_FAILED),
        (dpfit.BudgetExceeded, EXIT_BUDGET),
        (dpfit.Conflict, EXIT_CONFLICT),
        (dpfit.InvalidSpec, EXIT_INVALID),
        (dpfit.NotFound, EXIT_NOT_FOUND),
        (dpfit.AuthError, EXIT_AUTH),
    )
    return next((code for kind, code in kinds if isinstance(exc, kind)), EXIT_ERROR)


_HANDLERS: dict[tuple[str, str | None], Handler] = {
    key: handler for noun in NOUNS for key, handler in noun.HANDLERS.items()
}
