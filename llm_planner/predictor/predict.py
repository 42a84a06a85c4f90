"""Predictions from a trained checkpoint: before a plan is generated (tokens, segments, tokens
per segment, with an interval and bucket probabilities), and during generation, the remaining
tokens given what has been generated so far (online refinement).

Online refinement conditions the bucket distribution on the plan being longer than the tokens
generated so far: P(L | L > n) is the bucket probabilities with the buckets below n removed
and the one holding n cut at n (tokens spread evenly within a bucket), and the remaining
length is E[L | L > n] - n. The next segment's length is the remaining tokens over the
remaining segments, blended with this plan's own tokens per segment so far.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from llm_planner.predictor.features import task_features
from llm_planner.predictor.model import TrainedModel

Z90 = 1.645  # a 90% interval of a normal distribution
QUANTILE_LEVELS = np.linspace(0.0, 1.0, 21)  # of the training plans' tokens kept in a checkpoint


@dataclass(frozen=True)
class LengthPrediction:
    tokens: float  # plan tokens (median)
    tokens_low: float  # 90% interval
    tokens_high: float
    segments: float
    bucket_probs: tuple[float, ...]
    bucket_edges: tuple[float, ...]
    latency_ms: float = 0.0

    @property
    def tokens_per_segment(self) -> float:
        return self.tokens / max(1.0, self.segments)

    @property
    def bucket(self) -> int:
        return int(np.argmax(self.bucket_probs))


@dataclass(frozen=True)
class Remaining:
    tokens: float  # expected tokens still to come
    segments: float
    next_segment_tokens: float


class LengthPredictor:
    def __init__(self, model: TrainedModel) -> None:
        self.model = model

    @classmethod
    def load(cls, path: str | Path) -> LengthPredictor:
        state = torch.load(Path(path), map_location="cpu", weights_only=False)
        return cls(TrainedModel.from_state(state))

    def save(self, path: str | Path) -> None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        torch.save(self.model.state(), Path(path))

    def training_quantile(self, q: float) -> float:
        """This quantile of the training plans' tokens (linear between the kept 5% steps)."""
        quantiles = self.model.info.get("token_quantiles")
        if quantiles is None:
            raise ValueError(
                "this predictor checkpoint keeps no token quantiles of its training plans "
                "(made before they were kept); train it again with `llm-planner predictor train`"
            )
        return float(np.interp(q, QUANTILE_LEVELS, quantiles))

    def predict_many(self, skill_sets: list[str], task_texts: list[str]) -> list[LengthPrediction]:
        started = time.perf_counter()
        features = [task_features(t).vector() for t in task_texts]
        with torch.no_grad():
            tok, seg, logits = self.model.net(self.model.inputs(features, skill_sets))
        probs = torch.softmax(logits, dim=1).numpy()
        per_task_ms = (time.perf_counter() - started) * 1000 / max(1, len(task_texts))
        out = []
        for row in range(len(task_texts)):
            mu, sigma = float(tok[row, 0]), math.exp(0.5 * float(tok[row, 1]))
            out.append(
                LengthPrediction(  # medians of the log-normal distributions: the point estimates
                    tokens=math.exp(mu),
                    tokens_low=math.exp(mu - Z90 * sigma),
                    tokens_high=math.exp(mu + Z90 * sigma),
                    segments=math.exp(float(seg[row, 0])),
                    bucket_probs=tuple(float(p) for p in probs[row]),
                    bucket_edges=tuple(self.model.bucket_edges),
                    latency_ms=per_task_ms,
                )
            )
        return out

    def predict(self, skill_set: str, task_text: str) -> LengthPrediction:
        return self.predict_many([skill_set], [task_text])[0]

    def remaining(self, prediction: LengthPrediction, tokens_so_far: int, segments_so_far: int) -> Remaining:
        expected_total = conditional_mean(prediction, tokens_so_far)
        left = max(0.0, expected_total - tokens_so_far)
        segments_left = max(1.0, prediction.segments - segments_so_far) if left > 0 else 0.0
        per_segment = left / segments_left if segments_left else 0.0
        if segments_so_far:  # this plan's own pace so far weighs as much as the prediction
            per_segment = 0.5 * per_segment + 0.5 * tokens_so_far / segments_so_far
        return Remaining(left, segments_left, min(left, per_segment))


def conditional_mean(prediction: LengthPrediction, at_least: float) -> float:
    """E[L | L > at_least] under the bucket distribution (uniform within a bucket; the last,
    open bucket extends as far beyond its edge as the bucket before it is wide)."""
    edges = list(prediction.bucket_edges)
    if math.isinf(edges[-1]):
        edges[-1] = edges[-2] + max(1.0, edges[-2] - edges[-3] if len(edges) > 2 else edges[-2])
    mass = total = 0.0
    for p, a, b in zip(prediction.bucket_probs, edges[:-1], edges[1:]):
        lo = max(a, at_least)
        if b <= lo:
            continue
        part = p * (b - lo) / (b - a)
        mass += part
        total += part * (lo + b) / 2
    return total / mass if mass > 0 else at_least + 1.0
