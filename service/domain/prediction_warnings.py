"""What the public encoding did to a caller's prediction rows that changed their meaning.

``POST /v1/models/{id}/predict`` encodes the caller's rows by the model's public encoding
(:mod:`service.data.encoding`): a value that is not one of a categorical feature's declared
categories becomes the all-zero block (none of them), a number outside a numeric feature's
declared ``[min, max]`` is clipped to the nearer bound, and a cell that does not convert (``null``,
``"n/a"``, NaN) is MISSING — the midpoint for a number, no category for a categorical. Each is a
silent change of meaning (``"Phd"`` for ``"PhD"`` scores as no education at all), so the answer
lists them: one :class:`PredictionWarning` per (row, column) affected.

Privacy: the warnings are computed from the caller's own rows and the model's public schema
(the declared features, bounds and categories, already in ``GET /v1/models/{id}``) — never from
training data — so they cost nothing and tell the caller nothing they did not send or could not
read. The cells are converted by the very functions the encoder uses
(:func:`service.data.encoding.column_numbers`, :func:`~service.data.encoding.column_codes`), so
a warning is raised exactly when the encoder clips, zeroes or drops.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from service.data.encoding import Encoder, column_codes, column_numbers, normalise_value
from service.data.spec import CategoricalFeature, NumericFeature

WarningKind = Literal["unknown_category", "out_of_bounds", "missing"]

#: At most this many warnings are listed in one answer (a 100 000-row request with a wrong
#: column would otherwise answer 100 000 of them); ``total`` still counts all.
MAX_LISTED = 1000


@dataclass(frozen=True)
class PredictionWarning:
    """One cell whose encoding changed its meaning: ``row`` (0-based index into the request's
    rows), ``column`` (the feature), ``kind``, and a sentence saying what was done."""

    row: int
    column: str
    kind: WarningKind
    message: str


@dataclass(frozen=True)
class PredictionWarnings:
    listed: list[PredictionWarning]
    total: int


def prediction_warnings(
    encoder: Encoder, records: Sequence[Mapping[str, Any]], limit: int = MAX_LISTED
) -> PredictionWarnings:
    """The warnings of ``records`` (already accepted by :meth:`Encoder.encode_records`: every
    record holds every feature column), in row order then declared feature order; the first
    ``limit`` are listed, all are counted."""
    found: list[PredictionWarning] = []
    for feature in encoder.features:
        values = [record[feature.name] for record in records]
        if isinstance(feature, NumericFeature):
            found.extend(_numeric_warnings(feature, values))
        else:
            found.extend(_categorical_warnings(feature, values))
    found.sort(key=lambda w: w.row)  # stable: declared feature order within a row
    return PredictionWarnings(listed=found[:limit], total=len(found))


def _numeric_warnings(feature: NumericFeature, values: list[Any]) -> list[PredictionWarning]:
    numbers = column_numbers(values)
    out = []
    low, high = feature.min, feature.max
    for row in np.flatnonzero(np.isnan(numbers) | (numbers < low) | (numbers > high)):
        value, number = values[row], float(numbers[row])
        if math.isnan(number):
            what = "null" if value is None else f"{_shown(value)} is not a number"
            out.append(
                PredictionWarning(
                    int(row),
                    feature.name,
                    "missing",
                    f"{what}: scored as missing (the midpoint of [{low:g}, {high:g}])",
                )
            )
        else:
            bound, side = (
                (low, "below the declared min")
                if number < low
                else (high, "above the declared max")
            )
            out.append(
                PredictionWarning(
                    int(row),
                    feature.name,
                    "out_of_bounds",
                    f"{_shown(value)} is {side} {bound:g}: clipped to {bound:g}",
                )
            )
    return out


def _shown(value: Any) -> str:
    """A cell as the client sent it: JSON's spelling of a boolean (which a numeric column reads
    as 1 or 0), Python's repr otherwise (strings quoted)."""
    if isinstance(value, bool):
        return f"{'true' if value else 'false'} (read as {int(value)})"
    return repr(value)


def _categorical_warnings(
    feature: CategoricalFeature, values: list[Any]
) -> list[PredictionWarning]:
    lookup = {normalise_value(c): k for k, c in enumerate(feature.categories)}
    codes = column_codes(values, {key: k for key, k in lookup.items() if key is not None})
    out = []
    for row in np.flatnonzero(codes < 0):
        value = values[row]
        if normalise_value(value) is None:
            out.append(
                PredictionWarning(
                    int(row),
                    feature.name,
                    "missing",
                    f"{'null' if value is None else repr(value)}: scored as missing (none of "
                    "the declared categories)",
                )
            )
            continue
        message = f"{value!r} is not a declared category: scored as none of them"
        hint = _closest(str(value), [str(c) for c in feature.categories])
        if hint is not None:
            message += f" (did you mean {hint!r}?)"
        out.append(PredictionWarning(int(row), feature.name, "unknown_category", message))
    return out


def _closest(value: str, categories: list[str]) -> str | None:
    """The declared category the value most likely meant: the same text up to case and
    surrounding space, else the closest by :func:`difflib.get_close_matches`."""
    folded = value.strip().casefold()
    for category in categories:
        if category.strip().casefold() == folded:
            return category
    matches = difflib.get_close_matches(value, categories, n=1, cutoff=0.75)
    return matches[0] if matches else None
