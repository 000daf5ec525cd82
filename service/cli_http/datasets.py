"""`dpfit datasets`: list, show, register (a YAML or JSON spec) and withdraw datasets;
grant, list and revoke grants."""

from __future__ import annotations

import argparse
import json
import math
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from service.cli_http.common import (
    EXIT_INVALID,
    EXIT_OK,
    Handler,
    Leaf,
    UsageError,
    show,
    table,
)


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
    return show(
        args,
        client.datasets(),
        lambda items: (
            table([_dataset_line(d) for d in items], ["ID", "NAME", "OWNER", "ROWS", "BUDGET", ""])
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
    return show(args, client.dataset(args.dataset), _dataset_text)


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
    return show(args, client.register_dataset(spec), _dataset_text)


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
    show(args, check, _check_text)
    return EXIT_OK if check.get("would_register") else EXIT_INVALID


def datasets_withdraw(client: Any, args: argparse.Namespace) -> int:
    return show(
        args,
        client.withdraw_dataset(args.dataset),
        lambda w: f"withdrawn: {w['dataset_id']} ({w['name']}); its source may be registered again",
    )


def datasets_grant(client: Any, args: argparse.Namespace) -> int:
    grant = client.grant(args.dataset, args.principal, args.epsilon_cap)
    cap = grant.get("epsilon_cap")
    return show(
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
        return table(
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

    return show(args, records, text)


def datasets_revoke(client: Any, args: argparse.Namespace) -> int:
    revoked = client.revoke_grant(args.dataset, args.principal)
    return show(
        args,
        revoked,
        lambda g: (
            f"revoked {g['principal']} on {g['dataset_id']}: new jobs are refused; jobs already "
            "admitted keep running and the ledger is unchanged"
        ),
    )


def add_commands(sub: Any, leaf: Leaf, group: argparse.ArgumentParser) -> None:
    """Add ``datasets`` to the CLI's subparsers."""
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


HANDLERS: dict[tuple[str, str | None], Handler] = {
    ("datasets", "list"): datasets_list,
    ("datasets", "show"): datasets_show,
    ("datasets", "register"): datasets_register,
    ("datasets", "withdraw"): datasets_withdraw,
    ("datasets", "grant"): datasets_grant,
    ("datasets", "grants"): datasets_grants,
    ("datasets", "revoke"): datasets_revoke,
}
