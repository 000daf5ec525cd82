"""Log format of the service: one JSON object per line (default) or plain text.

``DPFIT_LOG_FORMAT=json`` (default) or ``text`` (service/settings.py). JSON lines carry ``ts``
(UTC, ISO 8601), ``level``, ``logger``, ``message`` and the record's structured fields — whatever
a caller passed as ``extra={"fields": {...}}`` — so a log shipper can index ``event``,
``request_id``, ``job_id``, ``route``… without parsing text. The text format prints the same
message followed by ``key=value`` pairs.

What callers may put in a line (the rule every ``dpfit.*`` logger follows): ids, route templates,
statuses, roles, public job parameters, durations. Never an API key, a data value, a dataset
location or an exception's message (SQL errors quote request data); exception TYPE names only.

Only the ``dpfit`` logger tree is configured by :func:`configure_logging` (its own handler, no
propagation to the root). uvicorn's own lines (startup, shutdown, errors) take the same format
through the ``log_config`` that ``service/api/server.py`` hands to ``uvicorn.run``
(:func:`uvicorn_log_config`), and the handlers on the root logger and on Dask's
``distributed`` in the API process get the same formatter (:func:`format_library_lines`).
Dask's worker *processes* keep Dask's text format for their own lines (memory warnings and the
like).
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import Any, Literal, TextIO

LogFormat = Literal["json", "text"]
LOG_FORMATS: tuple[LogFormat, ...] = ("json", "text")
_HANDLER_NAME = "dpfit-configured"


def fields_of(record: logging.LogRecord) -> dict[str, Any]:
    """The structured fields a record carries (``extra={"fields": {...}}``), else ``{}``."""
    fields = getattr(record, "fields", None)
    return dict(fields) if isinstance(fields, dict) else {}


class JsonFormatter(logging.Formatter):
    """One JSON object per record, on one line. Tracebacks are never written (``exc_info`` is
    reduced to the exception's type name): a traceback can quote data."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in fields_of(record).items():
            line.setdefault(key, value)
        if record.exc_info and record.exc_info[0] is not None:
            line.setdefault("exception", record.exc_info[0].__name__)
        return json.dumps(line, ensure_ascii=False, default=str, allow_nan=False)


class TextFormatter(logging.Formatter):
    """``LEVEL logger: message key=value …`` (no traceback, as for JSON)."""

    def format(self, record: logging.LogRecord) -> str:
        pairs = " ".join(f"{k}={v}" for k, v in fields_of(record).items())
        text = f"{record.levelname} {record.name}: {record.getMessage()}"
        return f"{text} {pairs}" if pairs else text


def configure_logging(
    log_format: LogFormat, level: int = logging.INFO, stream: TextIO | None = None
) -> logging.Handler:
    """Give the ``dpfit`` logger tree one handler with the chosen format (replacing the one a
    previous call installed; idempotent) and return it."""
    logger = logging.getLogger("dpfit")
    for handler in [h for h in logger.handlers if h.get_name() == _HANDLER_NAME]:
        logger.removeHandler(handler)
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.set_name(_HANDLER_NAME)
    handler.setFormatter(JsonFormatter() if log_format == "json" else TextFormatter())
    logger.addHandler(handler)
    logger.setLevel(level)
    logger.propagate = False
    return handler


def use_log_format(log_format: str) -> None:
    """This process's logging in ``DPFIT_LOG_FORMAT`` (``text``, else JSON): dpfit's own handler
    (:func:`configure_logging`) and the library handlers already installed
    (:func:`format_library_lines`) — the API process and every embedded worker process alike."""
    configure_logging("text" if log_format == "text" else "json")
    format_library_lines(log_format)


def formatter_for(log_format: str) -> logging.Formatter:
    """The formatter of ``DPFIT_LOG_FORMAT`` (``text``, else JSON)."""
    return TextFormatter() if log_format == "text" else JsonFormatter()


def uvicorn_log_config(log_format: str) -> dict[str, Any]:
    """A :func:`logging.config.dictConfig` for uvicorn's loggers in the service's format (its
    access log stays off: ``dpfit.access`` writes one line per request instead)."""
    formatter = "text" if log_format == "text" else "json"
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {
            "json": {"()": JsonFormatter},
            "text": {"()": TextFormatter},
        },
        "handlers": {
            "stderr": {
                "class": "logging.StreamHandler",
                "formatter": formatter,
                "stream": "ext://sys.stderr",
            }
        },
        "loggers": {
            "uvicorn": {"handlers": ["stderr"], "level": "INFO", "propagate": False},
            "uvicorn.error": {"level": "INFO"},
            "uvicorn.access": {"handlers": [], "level": "WARNING", "propagate": False},
        },
    }


def format_library_lines(log_format: str) -> None:
    """Give the handlers already on the root logger (``dpfit``'s command line installs one) and
    on ``distributed`` (Dask's, in this process) the service's formatter; their filters
    (``BoundedLog``) are kept."""
    for name in ("", "distributed"):
        for handler in logging.getLogger(name).handlers:
            handler.setFormatter(formatter_for(log_format))
