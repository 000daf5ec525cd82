"""`make lock`'s last step: the client's `sklearn` extra (scikit-learn and what it needs beyond
the service's own lock) cut, hashes included, from the dev lock into its own lock file, which
`make serve` installs with `--require-hashes` beside the service's lock.

    python -m tests.support.client_lock requirements-dev.lock requirements-client.lock
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

#: The client's `sklearn` extra and its dependencies that the service's lock does not pin.
PACKAGES = ("scikit-learn", "joblib", "threadpoolctl", "narwhals")


def client_lock(dev_lock: str) -> str:
    """The entries of :data:`PACKAGES` in ``dev_lock`` (pip-compile's format: a pin line, then
    indented hash and comment lines)."""
    out = ["# The client's sklearn extra, cut from requirements-dev.lock by `make lock`.", ""]
    lines = dev_lock.splitlines()
    for name in PACKAGES:
        start = next(i for i, line in enumerate(lines) if re.match(rf"{re.escape(name)}==", line))
        end = start + 1
        while end < len(lines) and lines[end].startswith(" "):
            end += 1
        out.extend(lines[start:end])
    return "\n".join(out) + "\n"


def main(argv: list[str]) -> int:
    source, target = argv
    Path(target).write_text(client_lock(Path(source).read_text()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
