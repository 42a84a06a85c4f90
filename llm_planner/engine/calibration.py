"""Correcting an engine profile's step predictions by the iterations the engine really runs.

A profile is measured once, by `llm-planner profile-engine`, on a bare engine. The planner's
engine spends more on every iteration than that engine did (it runs with the plan grammar's
logits processor and priority scheduling, beside the planner's own work on the same cores),
by a gap that differs from machine to machine: on a 2-core CPU a profile predicted decode
steps 21-30 ms too short at every batch size, and prefills and resumes 1.25-2.1x too cheap.
Decisions priced at the profile's times then expect an urgent segment to be written sooner
than it is (and let suspended generations back in before it is done).

`StepCalibration` watches measured iterations and learns a `StepCorrection`: an offset added
to every decode iteration (the median of the last decode-only iterations' errors) and a factor
on what prefill and resumes add to an iteration (the median of the last ratios measured). Both
are medians over a sliding window, so a stray slow iteration moves neither, and they follow the
engine as it warms up or the machine's load changes. An engine whose time is its profile (the
`sim` engine) needs no correction.
"""

from __future__ import annotations

import statistics
from collections import deque
from dataclasses import dataclass

from llm_planner.engine.profile import EngineProfile

WINDOW = 64  # iterations of each kind the correction is the median of
MIN_SAMPLES = 8  # before these, that part of the correction stays neutral
MIN_EXTRA_S = 0.005  # iterations whose predicted prefill and resume cost is smaller say little about its scale
FACTOR_RANGE = (0.5, 4.0)
MAX_NEGATIVE_OFFSET = 0.5  # an offset takes at most this fraction of the profile's decode base away


@dataclass(frozen=True)
class StepCorrection:
    """What measured iterations add to a profile's prediction of one iteration."""

    decode_offset_s: float = 0.0
    extra_factor: float = 1.0

    def predict_step_s(self, profile: EngineProfile, batch_size: int, context_tokens: int, prefill_tokens: int = 0,
                       resumes: int = 0) -> float:
        decode = profile.predict_step_s(batch_size, context_tokens)
        extra = profile.predict_step_s(batch_size, context_tokens, prefill_tokens, resumes) - decode
        if decode <= 0.0 and extra <= 0.0:
            return 0.0
        return max(0.0, decode + self.decode_offset_s) + self.extra_factor * extra

    def describe(self) -> str:
        return f"decode {self.decode_offset_s * 1000:+.0f} ms, prefill and resumes x{self.extra_factor:.2f}"


class StepCalibration:
    """Learns a StepCorrection from the iterations an engine runs."""

    def __init__(self, profile: EngineProfile) -> None:
        self.profile = profile
        self._decode_errors: deque[float] = deque(maxlen=WINDOW)
        self._extra_ratios: deque[float] = deque(maxlen=WINDOW)
        self.correction = StepCorrection()

    def observe(self, batch_size: int, context_tokens: int, prefill_tokens: int, resumes: int,
                measured_s: float) -> None:
        """One iteration: its batch (the generations it computed for), their context, the
        prompt tokens it prefilled and the suspended generations it resumed, and how long it took."""
        decode = self.profile.predict_step_s(batch_size, context_tokens)
        if prefill_tokens == 0 and resumes == 0:
            self._decode_errors.append(measured_s - decode)
        else:
            extra = self.profile.step_s(batch_size, context_tokens, prefill_tokens, resumes) - decode
            if extra < MIN_EXTRA_S:
                return
            decode_now = max(0.0, decode + self.correction.decode_offset_s)
            self._extra_ratios.append((measured_s - decode_now) / extra)
        self.correction = self._learned()

    def _learned(self) -> StepCorrection:
        offset, factor = 0.0, 1.0
        if len(self._decode_errors) >= MIN_SAMPLES:
            offset = max(-MAX_NEGATIVE_OFFSET * self.profile.decode_base_s, statistics.median(self._decode_errors))
        if len(self._extra_ratios) >= MIN_SAMPLES:
            low, high = FACTOR_RANGE
            factor = min(high, max(low, statistics.median(self._extra_ratios)))
        return StepCorrection(offset, factor)
