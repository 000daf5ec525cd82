"""`dpfit models`: show, predict with, evaluate privately and export released models."""

from __future__ import annotations

import argparse
import csv
import json
import pickle
import sys
import warnings
from pathlib import Path
from typing import Any

from service.cli_http.common import (
    EXIT_OK,
    Handler,
    Leaf,
    UsageError,
    estimate_lines,
    plain,
    print_json,
    show,
    table,
)


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
    return "\n".join(lines) + "\n" + table(rows, header)


def models_show(client: Any, args: argparse.Namespace) -> int:
    model = client.model(args.model)
    return show(args, model.to_json(), lambda _: _model_text(model))


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
    return show(
        args,
        answer,
        lambda a: table(
            [
                [i, p] if probabilities is None else [i, p, f"{probabilities[i]:.6f}"]
                for i, p in enumerate(a["predictions"])
            ],
            ["ROW", "PREDICTION"] if probabilities is None else ["ROW", "PREDICTION", "SCORE"],
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
        answer: dict[str, Any] = {"predictions": [plain(v) for v in predictions]}
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
            lines = estimate_lines(e)
            lines += [f"{name} noise std: {std:.4g}" for name, std in _stds(plan).items()]
            lines += [f"warning: {w}" for w in plan.get("warnings") or []]
            return "\n".join(lines)

        return show(args, dict(estimate), priced)
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

    return show(args, evaluation.data, text)


def models_export(client: Any, args: argparse.Namespace) -> int:
    model = client.model(args.model)
    if args.format == "json":
        if args.file is None:
            print_json(model.to_json())
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
    return show(
        args,
        {"model_id": model.id, "format": args.format, "file": str(args.file)},
        lambda r: f"wrote {r['file']} ({r['format']})",
    )


def add_commands(sub: Any, leaf: Leaf, group: argparse.ArgumentParser) -> None:
    """Add ``models`` to the CLI's subparsers."""
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


HANDLERS: dict[tuple[str, str | None], Handler] = {
    ("models", "show"): models_show,
    ("models", "predict"): models_predict,
    ("models", "evaluate"): models_evaluate,
    ("models", "export"): models_export,
}
