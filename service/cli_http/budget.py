"""`dpfit budget`: what is spent and what remains of a dataset's budget."""

from __future__ import annotations

import argparse
from typing import Any

from service.cli_http.common import Handler, Leaf, plain, show

_BAR = 40


def _burn(spent: float, total: float) -> str:
    used = 0 if total <= 0 else min(_BAR, round(_BAR * spent / total))
    return "█" * used + "·" * (_BAR - used)


def budget(client: Any, args: argparse.Namespace) -> int:
    frame = client.budget(args.dataset)
    row = frame.iloc[0].to_dict()
    value: dict[str, Any] = {k: plain(v) for k, v in row.items()}
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

    return show(args, value, text)


def add_commands(sub: Any, leaf: Leaf, group: argparse.ArgumentParser) -> None:
    """Add ``budget`` to the CLI's subparsers."""
    p = leaf(sub, "budget", "what is spent and what remains of a dataset's budget")
    p.add_argument("dataset")
    p.add_argument("--history", action="store_true", help="the burn-down, one line per charge")


HANDLERS: dict[tuple[str, str | None], Handler] = {
    ("budget", None): budget,
}
