"""`python -m bench <suite> [options]` — each suite prints a markdown table (and most write PNG
plots under bench/results/). `--smoke` runs any suite at tiny sizes (what CI runs)."""

from __future__ import annotations

import argparse
import sys
from types import ModuleType

from bench import (
    auto,
    auto_alternatives,
    catalog,
    fairness,
    head_to_head,
    hostile,
    in_database,
    load,
    multiclass,
    neighbours,
    noise,
    paper_wu,
    paper_zhang,
    reader,
    scaling,
    selection_k,
    service_overhead,
)

SUITES: dict[str, ModuleType] = {
    "catalog": catalog,
    "auto": auto,
    "auto-alternatives": auto_alternatives,
    "service": service_overhead,
    "load": load,
    "fairness": fairness,
    "hostile": hostile,
    "paper-zhang": paper_zhang,
    "paper-wu": paper_wu,
    "head-to-head": head_to_head,
    "scaling": scaling,
    "reader": reader,
    "neighbours": neighbours,
    "multiclass": multiclass,
    "noise": noise,
    "in-database": in_database,
    "selection-k": selection_k,
}


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
