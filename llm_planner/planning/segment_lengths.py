"""How many tokens a generation's next segment will take: what G(s) in PUD, the batch
controller's admission test and the decision to keep a generation running are priced with.

`FixedSegmentLengths` (config `predictor: none`, the default): the skill set's `segment_tokens`
(l_max) for every segment, and G at batch 1, as the TimelyLLM paper does.
`PredictedSegmentLengths` (`predictor: auto` or a checkpoint path): the length predictor's
estimate for this task, refined as the plan is generated, and G at the current batch.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from llm_planner.catalog.skills import SkillSet
from llm_planner.settings.config import PlannerConfig
from llm_planner.settings.paths import data_path

if TYPE_CHECKING:
    from llm_planner.predictor.predict import LengthPrediction

log = logging.getLogger(__name__)


class SegmentLengths(Protocol):
    at_current_batch: bool  # price G at the running batch size (else at batch 1)
    plans_ahead: bool  # `ahead` lists every segment the plan is expected to still have (else the next)

    def start(self, task_id: str, skill_set: SkillSet, task_text: str) -> None: ...

    def ahead(self, task_id: str, skill_set: SkillSet, tokens: int, segments: int) -> list[float]:
        """Expected tokens of each segment still to come (the next first; at least one)
        after `tokens` generated in `segments` segments."""

    def forget(self, task_id: str) -> None: ...

    def plan_size(self, task_id: str, uncertainty_weight: float, generated: int = 0) -> float | None:
        """The plan's predicted tokens, priced `uncertainty_weight` of the way from the median
        to the 90% interval's upper end (None without a predictor). Once `generated` tokens
        have reached that, what plans that got this far are expected to come to."""

    def is_huge(self, task_id: str, quantile: float) -> bool:
        """The plan is predicted longer than this quantile of the predictor's training plans."""


class FixedSegmentLengths:
    at_current_batch = False
    plans_ahead = False

    def start(self, task_id: str, skill_set: SkillSet, task_text: str) -> None:
        pass

    def ahead(self, task_id: str, skill_set: SkillSet, tokens: int, segments: int) -> list[float]:
        return [float(skill_set.segment_tokens)]  # the paper knows nothing of the plan's length

    def forget(self, task_id: str) -> None:
        pass

    def plan_size(self, task_id: str, uncertainty_weight: float, generated: int = 0) -> float | None:
        return None

    def is_huge(self, task_id: str, quantile: float) -> bool:
        return False


class PredictedSegmentLengths:
    at_current_batch = True
    plans_ahead = True

    def __init__(self, checkpoint: Path) -> None:
        from llm_planner.predictor.predict import LengthPredictor  # torch, only when configured

        self.predictor = LengthPredictor.load(checkpoint)
        self._predictions: dict[str, LengthPrediction] = {}

    def start(self, task_id: str, skill_set: SkillSet, task_text: str) -> None:
        self._predictions[task_id] = self.predictor.predict(skill_set.name, task_text)

    def ahead(self, task_id: str, skill_set: SkillSet, tokens: int, segments: int) -> list[float]:
        prediction = self._predictions.get(task_id)
        if prediction is None:
            return [float(skill_set.segment_tokens)]
        remaining = self.predictor.remaining(prediction, tokens, segments)
        following = max(0, round(remaining.segments) - 1)
        rest = max(0.0, remaining.tokens - remaining.next_segment_tokens)
        following_tokens = [max(1.0, rest / following)] * following if following else []
        return [max(1.0, remaining.next_segment_tokens)] + following_tokens

    def forget(self, task_id: str) -> None:
        self._predictions.pop(task_id, None)

    def plan_size(self, task_id: str, uncertainty_weight: float, generated: int = 0) -> float | None:
        prediction = self._predictions.get(task_id)
        if prediction is None:
            return None
        # Log-normal: the weight moves the quantile from the median (0) to the 90% bound (1).
        size = prediction.tokens * (prediction.tokens_high / prediction.tokens) ** uncertainty_weight
        if generated >= size:  # outrun: not nearly done, but as long as plans this long get
            size = generated + self.predictor.remaining(prediction, generated, 0).tokens
        return size

    def is_huge(self, task_id: str, quantile: float) -> bool:
        prediction = self._predictions.get(task_id)
        return prediction is not None and prediction.tokens > self.predictor.training_quantile(quantile)


class ObservedSegments:
    """The mean tokens of the segments with a skill call generated so far, per skill set: how
    long this model's segments typically are, where the expected length of a segment is an
    upper estimate (l_max) or a prediction; and how many such segments its finished plans
    had, where nothing predicts a plan's length."""

    def __init__(self) -> None:
        self._totals: dict[str, tuple[int, int]] = {}  # skill set -> (tokens, segments)
        self._plans: dict[str, tuple[int, int]] = {}  # skill set -> (segments, plans)

    def observe(self, skill_set: str, tokens: int) -> None:
        total, count = self._totals.get(skill_set, (0, 0))
        self._totals[skill_set] = (total + tokens, count + 1)

    def mean(self, skill_set: str) -> float | None:
        total, count = self._totals.get(skill_set, (0, 0))
        return total / count if count else None

    def observe_plan(self, skill_set: str, segments: int) -> None:
        total, count = self._plans.get(skill_set, (0, 0))
        self._plans[skill_set] = (total + segments, count + 1)

    def segments_to_come(self, skill_set: str, generated: int) -> int:
        """Segments a plan that has `generated` so far can be expected to still have: what its
        skill set's finished plans had on average, at least one. Before any finished, its own
        length is all there is to go on, and a plan that has reached it is as likely to be in
        its first half as in its second: as many again."""
        total, count = self._plans.get(skill_set, (0, 0))
        return max(1, round(total / count - generated) if count else generated)


def make_segment_lengths(config: PlannerConfig, use_predictor: bool = True, required: bool = False) -> SegmentLengths:
    """The configured estimate (`use_predictor` False: the fixed one, whatever is configured;
    `required`: the predictor of the engine's model when none is configured)."""
    if not use_predictor or (config.predictor == "none" and not required):
        return FixedSegmentLengths()
    if config.predictor in ("auto", "none"):
        path = data_path("config", "predictor", f"{Path(config.vllm.model).name}.pt")
    else:
        path = Path(config.predictor)
    if not path.is_file():
        raise FileNotFoundError(f"predictor checkpoint {path} not found (`llm-planner predictor train` makes one)")
    lengths = PredictedSegmentLengths(path)
    learned, runs = lengths.predictor.model.model_name, Path(config.vllm.model).name
    if config.engine == "vllm" and learned != runs:
        log.warning(
            "the predictor %s learned the plans of %s, the engine runs %s: plan lengths depend on the model "
            "(`llm-planner predictor collect` and `train` make one for it)",
            path,
            learned,
            runs,
        )
    return lengths
