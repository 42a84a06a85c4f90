"""Rank correlation, for how well a length follows another (numpy only)."""

from __future__ import annotations

import numpy as np


def spearman(xs: list[float], ys: list[float]) -> float | None:
    """Rank correlation (average ranks for ties); None for fewer than three pairs or a constant."""
    if len(xs) < 3:
        return None
    rx, ry = _ranks(np.asarray(xs, float)), _ranks(np.asarray(ys, float))
    if rx.std() == 0 or ry.std() == 0:
        return None
    return float(np.corrcoef(rx, ry)[0, 1])


def _ranks(values: np.ndarray) -> np.ndarray:
    order = values.argsort(kind="stable")
    ranks = np.empty(len(values))
    ranks[order] = np.arange(len(values), dtype=float)
    for value in np.unique(values):
        tied = values == value
        ranks[tied] = ranks[tied].mean()
    return ranks
