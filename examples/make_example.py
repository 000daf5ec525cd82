"""Regenerate examples/credit.csv: a small synthetic dataset for the walkthrough.

Deterministic (fixed seed); the rows are synthetic, no real person is in them.
Run: python examples/make_example.py
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

N_ROWS = 4000


def make(n: int = N_ROWS, seed: int = 20261122) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    age = rng.integers(18, 80, size=n)
    hours = np.clip(rng.normal(40, 10, size=n).round(), 1, 99).astype(int)
    education = rng.choice(["HS", "Bachelors", "Masters", "PhD"], size=n, p=[0.45, 0.3, 0.18, 0.07])
    sector = rng.choice(["private", "public", "self-employed"], size=n, p=[0.65, 0.2, 0.15])
    edu_effect = pd.Series(education).map({"HS": -1.2, "Bachelors": 0.3, "Masters": 0.9, "PhD": 1.4})
    sector_effect = pd.Series(sector).map({"private": 0.0, "public": -0.3, "self-employed": 0.4})
    score = (
        0.045 * (age - 45)
        + 0.06 * (hours - 40)
        + edu_effect.to_numpy()
        + sector_effect.to_numpy()
        - 0.4
        - 0.0009 * (age - 45) ** 2
    )
    positive = rng.random(n) < 1 / (1 + np.exp(-2.0 * score))
    return pd.DataFrame(
        {
            "age": age,
            "hours_per_week": hours,
            "education": education,
            "sector": sector,
            "income": np.where(positive, ">50K", "<=50K"),
        }
    )


if __name__ == "__main__":
    out = Path(__file__).with_name("credit.csv")
    make().to_csv(out, index=False)
    print(f"wrote {out}")
