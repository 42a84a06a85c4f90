"""How much of a plan's length can be predicted from its task at all: the committed predictor
next to other predictors fitted on the same training plans, and an upper bound for anything
that only knows the kind of task, all scored on the held-out plans.

Rows (MAE in tokens and Spearman against the plans' real token counts):
- the two baselines of `llm-planner predictor eval` (training mean; linear in input length);
- the committed checkpoint (MLP on the task features, `llm_planner/predictor/`);
- ridge regression of log(tokens) on the same features, its penalty chosen by 5-fold
  cross-validation on the training plans;
- k nearest training tasks by shared instruction words (same skill set), k by cross-validation;
- "kind oracle": each held-out plan predicted by the mean of the held-out plans of its own kind
  (robot and kind in the corpus: single, multi, search, ...). It peeks at the answers, so it is
  an upper bound for any predictor that only tells kinds of task apart, not a predictor;
- with --hidden: ridge on the bundled model's own hidden state at the end of the task's prompt
  (transformers; a forward pass per task, minutes on a CPU): what the model itself "knows"
  before it writes the plan.

Usage: python scripts/investigations/predictor_ceiling.py [SAMPLES] [--checkpoint PT] [--hidden] [--json OUT]
(SAMPLES: plans collected by `llm-planner predictor collect`, default the committed ones.)
"""

from __future__ import annotations

import argparse
import json
import re
import time
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import numpy as np

from llm_planner.catalog.scene import parse_task_text
from llm_planner.predictor.dataset import PlanSample, read_samples
from llm_planner.predictor.features import task_features
from llm_planner.predictor.predict import LengthPredictor
from llm_planner.predictor.rank import spearman
from llm_planner.settings.paths import data_path

if TYPE_CHECKING:
    from llm_planner.catalog.skills import SkillSet

T = TypeVar("T")

FOLDS = 5
COMMITTED_SAMPLES = Path(__file__).resolve().parents[2] / "docs" / "results" / "predictor" / "predictor-plans.jsonl"
_WORD = re.compile(r"[a-z]+|\d+")


def design(samples: list[PlanSample], skill_sets: list[str]) -> np.ndarray:
    return np.asarray([task_features(s.task_input).vector() + [float(s.skill_set == k) for k in skill_sets]
                       for s in samples], float)


def ridge(x_fit: np.ndarray, y_fit: np.ndarray, x_new: np.ndarray, penalty: float) -> np.ndarray:
    mean, std = x_fit.mean(0), x_fit.std(0) + 1e-6
    a = np.c_[(x_fit - mean) / std, np.ones(len(x_fit))]
    b = np.c_[(x_new - mean) / std, np.ones(len(x_new))]
    eye = np.eye(a.shape[1])
    eye[-1, -1] = 0.0  # the intercept is not penalized
    return b @ np.linalg.solve(a.T @ a + penalty * eye, a.T @ y_fit)


def words(sample: PlanSample) -> set[str]:
    return set(_WORD.findall(parse_task_text(sample.task_input).instruction.lower()))


def nearest(fit: list[PlanSample], new: list[PlanSample], k: int) -> np.ndarray:
    out = []
    for s in new:
        mine = words(s)
        scored = sorted(((len(mine & words(t)) / max(1, len(mine | words(t))), t.tokens)
                         for t in fit if t.skill_set == s.skill_set), reverse=True)
        out.append(np.log(np.median([tokens for _, tokens in scored[:k]])) if scored else 0.0)
    return np.asarray(out)


def cross_validated(choices: list[T], fit_predict, n: int, y: np.ndarray) -> T:
    """The choice with the lowest mean absolute error (tokens) over the folds of the training plans."""
    folds = np.random.default_rng(0).permutation(n) % FOLDS
    best, best_error = choices[0], np.inf
    for choice in choices:
        predicted = np.zeros(n)
        for f in range(FOLDS):
            predicted[folds == f] = fit_predict(folds != f, folds == f, choice)
        error = np.abs(np.exp(predicted) - np.exp(y)).mean()
        if error < best_error:
            best, best_error = choice, error
    return best


def kind(sample: PlanSample) -> str:
    # plan corpus ids: <robot>-<kind>-<number>; tuning corpus ids: <skill set>/<template>/<number>
    return sample.task_id.rsplit("/" if "/" in sample.task_id else "-", 1)[0]


def hidden_states(samples: list[PlanSample]) -> tuple[np.ndarray, float]:
    """The bundled model's last-layer state at the end of each task's prompt, and ms per task."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from llm_planner.catalog.skills import load_skill_set
    from llm_planner.engine.models import resolve_model
    from llm_planner.planning.prompts import user_turn

    path = resolve_model("smollm2-135m-instruct")
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    skill_sets: dict[str, SkillSet] = {}
    states, started = [], time.perf_counter()
    for s in samples:
        skill_set = skill_sets.setdefault(s.skill_set, load_skill_set(s.skill_set))
        chat = [{"role": "system", "content": skill_set.prompt()},
                {"role": "user", "content": user_turn(s.task_input)}]
        text = tokenizer.apply_chat_template(chat, add_generation_prompt=True, tokenize=False)
        with torch.no_grad():
            out = model(tokenizer(text, return_tensors="pt").input_ids, output_hidden_states=True)
        states.append(out.hidden_states[-1][0, -1].numpy())
    return np.asarray(states), (time.perf_counter() - started) * 1000 / len(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("samples", nargs="?", default=str(COMMITTED_SAMPLES))
    parser.add_argument("--hidden", action="store_true", help="also the model's own hidden state (slow)")
    parser.add_argument("--checkpoint", default=str(data_path("config", "predictor", "smollm2-135m-instruct.pt")),
                        help="the predictor whose row is shown (default: the base model's)")
    parser.add_argument("--json")
    args = parser.parse_args()
    samples = read_samples(args.samples)
    fit = [s for s in samples if s.split != "heldout"]
    new = [s for s in samples if s.split == "heldout"]
    skill_sets = sorted({s.skill_set for s in samples})
    y_fit = np.log([s.tokens for s in fit])
    truth = np.asarray([s.tokens for s in new], float)
    x_fit, x_new = design(fit, skill_sets), design(new, skill_sets)
    rows: dict[str, np.ndarray] = {}

    rows["training mean"] = np.full(len(new), np.exp(y_fit).mean())
    n_words = lambda ss: np.asarray([task_features(s.task_input).words for s in ss])  # noqa: E731
    rows["linear in input length"] = np.polyval(np.polyfit(n_words(fit), np.exp(y_fit), 1), n_words(new))
    checkpoint = LengthPredictor.load(args.checkpoint)
    rows["committed predictor (MLP)"] = np.asarray(
        [p.tokens for p in checkpoint.predict_many([s.skill_set for s in new], [s.task_input for s in new])])
    penalty = cross_validated([0.3, 1, 3, 10, 30, 100, 300],
                              lambda a, b, lam: ridge(x_fit[a], y_fit[a], x_fit[b], lam), len(fit), y_fit)
    rows[f"ridge on the features (penalty {penalty})"] = np.exp(ridge(x_fit, y_fit, x_new, penalty))
    k = cross_validated([1, 3, 5, 9, 15], lambda a, b, kk: nearest(
        [fit[i] for i in np.where(a)[0]], [fit[i] for i in np.where(b)[0]], kk), len(fit), y_fit)
    rows[f"{k} nearest tasks by words"] = np.exp(nearest(fit, new, k))
    by_kind: dict[str, list[int]] = {}
    for s in new:
        by_kind.setdefault(kind(s), []).append(s.tokens)
    rows["kind oracle (peeks: an upper bound)"] = np.asarray([np.mean(by_kind[kind(s)]) for s in new])
    latency = {}
    if args.hidden:
        states, ms = hidden_states(fit + new)
        h_fit, h_new = np.c_[states[:len(fit)], x_fit], np.c_[states[len(fit):], x_new]
        penalty = cross_validated([10, 100, 1000, 10000],
                                  lambda a, b, lam: ridge(h_fit[a], y_fit[a], h_fit[b], lam), len(fit), y_fit)
        name = f"ridge on the model's hidden state (penalty {penalty})"
        rows[name] = np.exp(ridge(h_fit, y_fit, h_new, penalty))
        latency[name] = ms

    result = {"samples": args.samples, "train": len(fit), "heldout": len(new), "rows": {}}
    print(f"{len(new)} held-out plans ({len(fit)} for fitting), mean {truth.mean():.1f} tokens")
    print(f"{'predictor':<52} {'MAE tokens':>10} {'Spearman':>9}")
    for name, predicted in rows.items():
        mae, rho = float(np.abs(predicted - truth).mean()), spearman(list(predicted), list(truth))
        result["rows"][name] = {"mae_tokens": mae, "spearman_tokens": rho, **(
            {"ms_per_task": latency[name]} if name in latency else {})}
        extra = f"  ({latency[name]:.0f} ms per task)" if name in latency else ""
        print(f"{name:<52} {mae:>10.2f} {rho if rho is not None else float('nan'):>9.2f}{extra}")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1) + "\n")
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
