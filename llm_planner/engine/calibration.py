"""Correcting an engine profile's step predictions by the iterations the engine really runs.

A profile is measured once, by `llm-planner profile-engine`, on a bare engine. The planner's
engine spends more on every iteration than that engine did (it runs with the plan grammar's
logits processor and priority scheduling, beside the planner's own work on the same cores),
by a gap that differs from machine to machine: on a 2-core CPU a profile predicted decode
steps 21-30 ms too short at every batch size, and prefills and resumes 1.25-2.1x too cheap.
Decisions priced at the profile's times then expect an urgent segment to be written sooner
than it is (and let suspended generations back in before it is done).

A profile's decode line is fitted over batches of 1 to 32, where the larger ones weigh most;
at the few sequences a fleet keeps running, the line can be steeper than the engine: on a
2-core CPU with AVX-512, measured decode iterations took about the same at batch 1 to 6, while
the profile added 2.6 ms a sequence. Priced so, a smaller batch looks faster than it is, and
suspending a generation for a more important one looks like a gain it does not bring.

Nor is an engine's cost always a line in the batch size: on the AMD EPYC with AVX-512 and
bf16, live decode iterations of 2 sequences took about 4 ms more than those of 1, 3 or 4 (about
30 ms). Priced on a line, suspending the third of three generations for an alert looks like a
gain where it makes every step of the alert slower.

`StepCalibration` watches measured iterations and learns a `StepCorrection`: an offset added
to every decode iteration and a slope added per further sequence (a line through the median
error at each batch size seen, weighted by how often it was seen), the median error of each
batch size seen often enough, which replaces the line's there, and a factor on what
prefill and resumes add to an iteration (the median of the last ratios measured). All come
from medians over a sliding window, so a stray slow iteration moves none of them, and they
follow the engine as it warms up or the machine's load changes. An engine whose time is its
profile (the `sim` engine) needs no correction.
"""

from __future__ import annotations

import statistics
from collections import deque
from dataclasses import dataclass, field

from llm_planner.engine.profile import EngineProfile

WINDOW = 128  # iterations of each kind the correction is learned from
MIN_SAMPLES = 8  # before these, that part of the correction stays neutral
MIN_BATCH_SAMPLES = 4  # decode iterations at one batch size before its median error counts towards the slope
MIN_OWN_SAMPLES = 8  # decode iterations at one batch size before its median error replaces the line's there
MIN_EXTRA_S = 0.005  # iterations whose predicted prefill and resume cost is smaller say little about its scale
FACTOR_RANGE = (0.5, 4.0)
MAX_NEGATIVE_OFFSET = 0.5  # an offset takes at most this fraction of the profile's decode base away
# The slope added per sequence, as a fraction of the profile's own: at -1 a further sequence costs
# only its context, at +1 twice the profile's (a line through a few batch sizes extrapolates).
SLOPE_RANGE = (-1.0, 1.0)
OFF_LINE_SHOWN_S = 0.001  # a batch size whose own error is this far off the line is named in `describe`


@dataclass(frozen=True)
class StepCorrection:
    """What measured iterations add to a profile's prediction of one iteration."""

    decode_offset_s: float = 0.0
    extra_factor: float = 1.0
    decode_s_per_seq: float = 0.0  # added per further sequence in the batch
    by_batch_s: dict[int, float] = field(default_factory=dict)  # batch size -> its own error, where measured

    def predict_step_s(
        self, profile: EngineProfile, batch_size: int, context_tokens: int, prefill_tokens: int = 0, resumes: int = 0
    ) -> float:
        decode = profile.predict_step_s(batch_size, context_tokens)
        extra = profile.predict_step_s(batch_size, context_tokens, prefill_tokens, resumes) - decode
        if decode <= 0.0 and extra <= 0.0:
            return 0.0
        return self.decode_s(decode, batch_size) + self.extra_factor * extra

    def decode_s(self, predicted_s: float, batch_size: int) -> float:
        """A decode iteration the profile predicts at `predicted_s`, corrected."""
        return max(0.0, predicted_s + self.decode_error_s(batch_size))

    def decode_error_s(self, batch_size: int) -> float:
        """What a decode iteration of `batch_size` sequences takes beyond the profile: its own
        measured error, else the line's, but never less than a smaller batch was measured to
        take (the profile's step grows with the batch, so no further sequence makes an
        iteration cheaper than one measured)."""
        line = self._line_s(batch_size)
        if not self.by_batch_s:
            return line
        own = self.by_batch_s.get(batch_size)
        if own is not None:
            return own
        return max([line] + [e for b, e in self.by_batch_s.items() if b < batch_size])

    def _line_s(self, batch_size: int) -> float:
        return self.decode_offset_s + self.decode_s_per_seq * max(0, batch_size - 1)

    def describe(self) -> str:
        off_line = "".join(
            f", batch {batch} {(error - self._line_s(batch)) * 1000:+.0f} ms"
            for batch, error in sorted(self.by_batch_s.items())
            if abs(error - self._line_s(batch)) >= OFF_LINE_SHOWN_S
        )
        return (
            f"decode {self.decode_offset_s * 1000:+.0f} ms {self.decode_s_per_seq * 1000:+.1f} ms a further "
            f"sequence{off_line}, prefill and resumes x{self.extra_factor:.2f}"
        )


class StepCalibration:
    """Learns a StepCorrection from the iterations an engine runs."""

    def __init__(self, profile: EngineProfile) -> None:
        self.profile = profile
        self._decode_errors: deque[tuple[int, float]] = deque(maxlen=WINDOW)  # (batch size, error)
        self._extra_ratios: deque[float] = deque(maxlen=WINDOW)
        self.correction = StepCorrection()

    def observe(
        self, batch_size: int, context_tokens: int, prefill_tokens: int, resumes: int, measured_s: float
    ) -> None:
        """One iteration: its batch (the generations it computed for), their context, the
        prompt tokens it prefilled and the suspended generations it resumed, and how long it took."""
        decode = self.profile.predict_step_s(batch_size, context_tokens)
        if prefill_tokens == 0 and resumes == 0:
            self._decode_errors.append((batch_size, measured_s - decode))
        else:
            extra = self.profile.step_s(batch_size, context_tokens, prefill_tokens, resumes) - decode
            if extra < MIN_EXTRA_S:
                return
            decode_now = self.correction.decode_s(decode, batch_size)
            self._extra_ratios.append((measured_s - decode_now) / extra)
        self.correction = self._learned()

    def _learned(self) -> StepCorrection:
        offset, slope, factor, own = 0.0, 0.0, 1.0, {}
        if len(self._decode_errors) >= MIN_SAMPLES:
            by_batch: dict[int, list[float]] = {}
            for batch, error in self._decode_errors:
                by_batch.setdefault(batch, []).append(error)
            medians = {batch: (statistics.median(errors), len(errors)) for batch, errors in by_batch.items()}
            floor = -MAX_NEGATIVE_OFFSET * self.profile.decode_base_s
            offset, slope = self._decode_line(medians)
            offset = max(floor, offset)
            own = {batch: max(floor, median) for batch, (median, n) in medians.items() if n >= MIN_OWN_SAMPLES}
        if len(self._extra_ratios) >= MIN_SAMPLES:
            low, high = FACTOR_RANGE
            factor = min(high, max(low, statistics.median(self._extra_ratios)))
        return StepCorrection(offset, factor, slope, own)

    def _decode_line(self, medians: dict[int, tuple[float, int]]) -> tuple[float, float]:
        """(error at batch 1, error added per further sequence): a line through the median
        error of each batch size seen often enough (`medians`: batch size -> median error, count),
        weighted by its count; flat, at the median of all errors, until two batch sizes have been."""
        points = [(batch - 1, median, n) for batch, (median, n) in medians.items() if n >= MIN_BATCH_SAMPLES]
        if len(points) < 2:
            return statistics.median(error for _, error in self._decode_errors), 0.0
        weight = sum(n for _, _, n in points)
        mean_x = sum(x * n for x, _, n in points) / weight
        mean_y = sum(y * n for _, y, n in points) / weight
        slope = sum(n * (x - mean_x) * (y - mean_y) for x, y, n in points) / sum(
            n * (x - mean_x) ** 2 for x, _, n in points
        )
        low, high = (bound * self.profile.decode_s_per_seq for bound in SLOPE_RANGE)
        slope = min(high, max(low, slope))
        return mean_y - slope * mean_x, slope
