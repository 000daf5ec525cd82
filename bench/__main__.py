"""`python -m bench <suite> [options]` — each suite prints a markdown table."""

from __future__ import annotations

import argparse
import sys

from bench import catalog, service_overhead

SUITES = {"catalog": catalog, "service": service_overhead}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench")
    sub = parser.add_subparsers(dest="suite", required=True)
    for name, module in SUITES.items():
        module.add_arguments(sub.add_parser(name, help=module.__doc__.splitlines()[0]))
    args = parser.parse_args(argv)
    SUITES[args.suite].run(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
