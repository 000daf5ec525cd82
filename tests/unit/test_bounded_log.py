"""service/api/server.py's BoundedLog: no tracebacks, repeats bounded per window (issue 23)."""

from __future__ import annotations

import io
import logging

from service.api.server import BoundedLog


def _logger(name: str, bounded: BoundedLog) -> tuple[logging.Logger, io.StringIO]:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(bounded)
    logger = logging.getLogger(name)
    logger.handlers[:] = [handler]
    logger.propagate = False
    logger.setLevel(logging.INFO)
    return logger, stream


def test_repeats_are_bounded_and_tracebacks_reduced_to_the_type() -> None:
    logger, stream = _logger("test.bounded.errors", BoundedLog(burst=3, window=3600))
    try:
        raise ValueError("row 17 holds 42")  # a message that could quote data
    except ValueError:
        for _ in range(50):
            logger.error("task failed", exc_info=True)
    logger.error("another line")
    lines = stream.getvalue().splitlines()
    assert lines == ["task failed (ValueError)"] * 3 + ["another line"]


def test_a_new_window_says_how_many_were_suppressed() -> None:
    bounded = BoundedLog(burst=1, window=0.0)  # every record opens a new window
    logger, stream = _logger("test.bounded.window", bounded)
    logger.warning("again")
    assert stream.getvalue().splitlines() == ["again"]
    bounded.window = 3600
    for _ in range(5):
        logger.warning("again")
    bounded.window = 0.0
    logger.warning("again")
    assert stream.getvalue().splitlines()[-1] == "[5 similar lines suppressed] again"


def test_only_client_errors_of_access_lines_are_bounded() -> None:
    logger, stream = _logger(
        "test.bounded.access", BoundedLog(burst=2, window=3600, only_client_errors=True)
    )
    for status in [200] * 20 + [401] * 20 + [500] * 5:
        logger.info("GET /x %d", status, extra={"fields": {"route": "/x", "status": status}})
    lines = stream.getvalue().splitlines()
    assert lines.count("GET /x 200") == 20 and lines.count("GET /x 500") == 5
    assert lines.count("GET /x 401") == 2
