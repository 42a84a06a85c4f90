"""Training from plan samples and scoring a predictor against two baselines: "the training
mean" and "linear in input length" (words of the instruction), both fitted on the training
samples and kept in the checkpoint."""

from __future__ import annotations

import numpy as np

from llm_planner.predictor.dataset import PlanSample
from llm_planner.predictor.features import TaskFeatures, task_features
from llm_planner.predictor.model import bucket_of, train
from llm_planner.predictor.predict import QUANTILE_LEVELS, LengthPredictor
from llm_planner.predictor.rank import spearman

RESULT_KEYS = (
    "tasks",
    "mae_tokens",
    "mae_segments",
    "spearman_tokens",
    "bucket_accuracy",
    "baseline_mean_mae_tokens",
    "baseline_length_mae_tokens",
    "latency_ms_p50",
)


def train_predictor(samples: list[PlanSample], model_name: str, epochs: int = 600) -> LengthPredictor:
    features = [task_features(s.task_input) for s in samples]
    model = train(
        [f.vector() for f in features],
        [s.skill_set for s in samples],
        [s.tokens for s in samples],
        [max(1, s.segments) for s in samples],
        TaskFeatures.names(),
        model_name,
        epochs,
    )
    words = np.asarray([f.words for f in features])
    tokens = np.asarray([s.tokens for s in samples], float)
    slope, intercept = np.polyfit(words, tokens, 1) if len(set(words)) > 1 else (0.0, tokens.mean())
    model.info |= {
        "baseline_mean_tokens": float(tokens.mean()),
        "baseline_length_fit": [float(slope), float(intercept)],
        "token_quantiles": np.quantile(tokens, QUANTILE_LEVELS).tolist(),
    }
    return LengthPredictor(model)


def evaluate(predictor: LengthPredictor, samples: list[PlanSample]) -> dict:
    predictions = predictor.predict_many([s.skill_set for s in samples], [s.task_input for s in samples])
    tokens = np.asarray([s.tokens for s in samples], float)
    segments = np.asarray([s.segments for s in samples], float)
    predicted = np.asarray([p.tokens for p in predictions])
    info = predictor.model.info
    slope, intercept = info.get("baseline_length_fit", [0.0, info.get("baseline_mean_tokens", 0.0)])
    words = np.asarray([task_features(s.task_input).words for s in samples])
    edges = predictor.model.bucket_edges
    # latency: one task at a time, as the planner asks
    single = [predictor.predict(s.skill_set, s.task_input).latency_ms for s in samples[:50]]
    inside = [p.tokens_low <= t <= p.tokens_high for p, t in zip(predictions, tokens)]
    return {
        "tasks": len(samples),
        "mae_tokens": float(np.abs(predicted - tokens).mean()),
        "mae_segments": float(np.abs(np.asarray([p.segments for p in predictions]) - segments).mean()),
        "spearman_tokens": spearman(list(predicted), list(tokens)),
        "bucket_accuracy": float(np.mean([p.bucket == bucket_of(t, edges) for p, t in zip(predictions, tokens)])),
        "baseline_mean_mae_tokens": float(np.abs(info.get("baseline_mean_tokens", 0.0) - tokens).mean()),
        "baseline_length_mae_tokens": float(np.abs(slope * words + intercept - tokens).mean()),
        "latency_ms_p50": float(np.median(single)),
        "interval90_coverage": float(np.mean(inside)),
        "buckets": len(edges) - 1,
    }
