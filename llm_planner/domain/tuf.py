"""Time-utility functions and the Potential Utility Density priority (TimelyLLM eq. 4).

TUF(t) = min(beta, beta + alpha * (t - ert)), clamped at 0, alpha = -beta / (cutoff - ert):
full utility `beta` up to the expected response time, falling linearly to 0 at the cutoff.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

# Slack below this is treated as "due now"; keeps PUD finite for late generations.
MIN_SLACK_S = 1e-3


@dataclass(frozen=True, slots=True)
class Tuf:
    beta: float
    ert_s: float
    cutoff_s: float

    def __post_init__(self) -> None:
        """The one validator of a TUF: configs, trace files and incoming tasks all use it."""
        for name in ("beta", "ert_s", "cutoff_s"):
            if not math.isfinite(getattr(self, name)):
                raise ValueError(f"TUF {name} is non-finite ({getattr(self, name)})")
        if self.beta <= 0:
            raise ValueError(f"TUF beta must be > 0, got {self.beta}")
        if self.ert_s < 0:
            raise ValueError(f"TUF ert_s must be >= 0, got {self.ert_s}")
        if self.cutoff_s <= self.ert_s:
            raise ValueError(f"TUF cutoff_s ({self.cutoff_s}) must be greater than ert_s ({self.ert_s})")

    @property
    def alpha(self) -> float:
        return -self.beta / (self.cutoff_s - self.ert_s)

    def utility(self, elapsed_s: float) -> float:
        """Utility of a response `elapsed_s` after the reference time."""
        if elapsed_s <= self.ert_s:
            return self.beta
        return max(0.0, self.beta + self.alpha * (elapsed_s - self.ert_s))

    def resumed(self) -> Tuf:
        """TUF_1 for segments k > 0: same beta and slope, ERT 0 from the end of the previous segment."""
        return Tuf(self.beta, 0.0, self.cutoff_s - self.ert_s)

    def as_triple(self) -> tuple[float, float, float]:
        return (self.beta, self.ert_s, self.cutoff_s)


def latest_start(tuf: Tuf, ref_s: float, gen_time_s: float) -> float:
    """Latest time a segment can start generating and still earn full utility."""
    return ref_s + tuf.ert_s - gen_time_s


def pud_from_latest_start(tuf: Tuf, latest_start_s: float, gen_time_s: float, now_s: float) -> float:
    """PUD given the latest full-utility start (see `pud_priority`); the scheduler's queue
    keeps latest starts, and both compute priorities through this one function."""
    late = now_s - latest_start_s
    utility = tuf.beta if late <= 0 else max(0.0, tuf.beta + tuf.alpha * late)
    slack = max(MIN_SLACK_S, -late)
    return utility / (gen_time_s * slack)


def pud_priority(tuf: Tuf, ref_s: float, gen_time_s: float, now_s: float) -> float:
    """Potential Utility Density of scheduling a segment now (TimelyLLM eq. 4):
    TUF(expected response) / (G * slack).

    ref_s: arrival (first segment) or estimated end of the previous segment's execution.
    gen_time_s: estimated generation time G of the segment.
    The expected response if generation starts now is now + G - ref; the slack is the time
    left before utility starts to drop, at least MIN_SLACK_S.
    """
    return pud_from_latest_start(tuf, latest_start(tuf, ref_s, gen_time_s), gen_time_s, now_s)
