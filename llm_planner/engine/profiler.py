"""`llm-planner profile-engine`: measure the real engine and write an engine profile for the
`sim` engine (config/engine_profiles/*.yaml).

Measured on the vLLM engine itself (no planner in the loop):
- prefill: time to the first token of prompts of several lengths with a cold cache; the slope
  of a line through them is the per-token cost;
- decode: median step time of B generations of context C each, for several B and C; a least-
  squares fit gives the base cost, the cost per extra sequence and per attended token;
- resume: abort a generation and re-add prompt + generated ids; the time to its next token
  with the prefix cache (resume) and after emptying the cache (a cold re-prefill of the same
  context). The profile's `resume_s` is the resume's cost beyond a decode step.

Prefill and decode are measured in rounds, every size once a round, and each size's figure is
the median over the rounds. These machines are shared, and their speed changes over seconds
to minutes: measured one size after another, a slow spell falls on a few sizes whole (a batch
of 4 measured faster than a batch of 1, a fit 17% off its points); measured in rounds, it
falls on one round of every size, which the median leaves out.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np
import yaml

from llm_planner.engine.profile import EngineProfile

PREFILL_FIT_MAX_TOKENS = 512
ROUNDS = 3  # each size is measured once a round; its figure is the median over the rounds


@dataclass
class ProfileMeasurements:
    prefill: list[tuple[int, float]] = field(default_factory=list)  # (tokens, seconds)
    decode: list[tuple[int, int, float]] = field(default_factory=list)  # (batch, context per seq, seconds)
    resume_hit_s: list[float] = field(default_factory=list)
    resume_cold_s: list[float] = field(default_factory=list)
    resume_context: int = 0
    resume_generated: int = 0


class EngineProfiler:
    """Drives a VllmEngine's LLMEngine directly with synthetic prompts (random token ids)."""

    def __init__(
        self, engine, log: Callable[[str], None] = print, seed: int = 0, timer: Callable[[], float] = time.perf_counter
    ) -> None:
        self.engine = engine
        self.timer = timer
        self.llm = engine.llm
        self.log = log
        self.rng = np.random.default_rng(seed)
        self._ids = 0
        vocab = len(engine.tokenizer)
        self._vocab = (1000, max(1001, vocab - 1000))  # plain tokens, away from special ones

    def _tokens(self, n: int) -> list[int]:
        return [int(t) for t in self.rng.integers(*self._vocab, size=n)]

    def _add(self, prompt: list[int], max_tokens: int) -> str:
        self._ids += 1
        rid = f"profile-{self._ids}"
        self.llm.add_request(rid, {"prompt_token_ids": prompt}, self._sampling(max_tokens))  # a TokensPrompt
        return rid

    def _sampling(self, max_tokens: int):
        from vllm import SamplingParams

        return SamplingParams(temperature=0.0, max_tokens=max_tokens, ignore_eos=True, detokenize=False)

    def _drain(self) -> None:
        while self.llm.has_unfinished_requests():
            self.llm.step()

    def _first_token_s(self, prompt: list[int]) -> tuple[float, list[int]]:
        """Seconds from adding the request to its first token; returns the generated ids."""
        started = self.timer()
        rid = self._add(prompt, 1)
        out: list[int] = []
        while True:
            for ro in self.llm.step():
                if ro.request_id == rid and ro.outputs and ro.outputs[0].token_ids:
                    out = list(ro.outputs[0].token_ids)
            if out:
                elapsed = self.timer() - started
                self._drain()
                return elapsed, out

    def measure_prefill(self, lengths: list[int], repeats: int) -> list[tuple[int, float]]:
        """Each length's cold prefill, once a round for `repeats` rounds: (tokens, median seconds)."""
        times: dict[int, list[float]] = {n: [] for n in lengths}
        for _ in range(repeats):
            for n in lengths:
                self.llm.reset_prefix_cache()
                times[n].append(self._first_token_s(self._tokens(n))[0])
        rows = [(n, statistics.median(times[n])) for n in lengths]
        for n, seconds in rows:
            self.log(f"  prefill {n:5d} tokens: {seconds * 1000:8.1f} ms{_spread(times[n])}")
        return rows

    def measure_decode(
        self, batches: list[int], contexts: list[int], steps: int, rounds: int = ROUNDS
    ) -> list[tuple[int, int, float]]:
        """Step times of `batch` generations of `context` tokens each, every size once a round
        (`steps` steps each time), alternately forwards and backwards through the sizes, so
        that a drift within a round weighs on all of them alike: (batch, context, median over
        the rounds of each round's median step). A size's prompts are the same every round, so
        after the first the prefix cache serves them and a round costs little more than its steps."""
        capacity = self.engine.kv_capacity_tokens
        sizes: list[tuple[int, int, list[list[int]]]] = []
        for context in contexts:
            for batch in batches:
                if batch * (context + steps + 4) > capacity:
                    # vLLM would run only as many as fit: the step would be mislabelled
                    self.log(
                        f"  decode batch {batch:3d}, context {context:5d}: skipped, "
                        f"{batch * (context + steps + 4)} tokens do not fit the {capacity}-token KV cache"
                    )
                    continue
                sizes.append((batch, context, [self._tokens(context) for _ in range(batch)]))
        self.llm.reset_prefix_cache()
        medians: dict[tuple[int, int], list[float]] = {(batch, context): [] for batch, context, _ in sizes}
        for round_ in range(rounds):
            for batch, context, prompts in sizes if round_ % 2 == 0 else sizes[::-1]:
                medians[(batch, context)].append(self._decode_step_s(prompts, steps))
        rows = [(batch, context, statistics.median(medians[(batch, context)])) for batch, context, _ in sizes]
        for batch, context, seconds in rows:
            self.log(
                f"  decode batch {batch:3d}, context {context:5d}: {seconds * 1000:7.2f} ms/step"
                f"{_spread(medians[(batch, context)])}"
            )
        return rows

    def _decode_step_s(self, prompts: list[list[int]], steps: int) -> float:
        """The median of `steps` decode steps of the prompts' generations, all prefilled first."""
        ids = [self._add(prompt, steps + 4) for prompt in prompts]
        seen: set[str] = set()
        while len(seen) < len(ids):  # every prompt prefilled and decoding
            seen.update(ro.request_id for ro in self.llm.step() if ro.outputs and ro.outputs[0].token_ids)
        durations = []
        for _ in range(steps):
            started = self.timer()
            self.llm.step()
            durations.append(self.timer() - started)
        self._drain()
        return statistics.median(durations)

    def measure_resume(self, context: int, generated: int, repeats: int) -> tuple[list[float], list[float]]:
        """Resume after abort (prefix-cache hit) vs the same context with the cache emptied."""
        hits, colds = [], []
        for _ in range(repeats):
            self.llm.reset_prefix_cache()
            prompt = self._tokens(context)
            rid = self._add(prompt, generated)
            out: list[int] = []
            while len(out) < generated:
                for ro in self.llm.step():
                    if ro.request_id == rid:
                        out = list(ro.outputs[0].token_ids)
            self._drain()
            resumed = prompt + out
            hits.append(self._first_token_s(resumed)[0])  # its blocks are still cached
            self.llm.reset_prefix_cache()
            colds.append(self._first_token_s(resumed)[0])
        self.log(
            f"  resume of a {context + generated}-token context: {statistics.median(hits) * 1000:.1f} ms "
            f"with the prefix cache, {statistics.median(colds) * 1000:.1f} ms cold"
        )
        return hits, colds

    def run(self, quick: bool = False) -> ProfileMeasurements:
        m = ProfileMeasurements()
        self.log("prefill (cold cache):")
        m.prefill = self.measure_prefill([64, 256, 512, 1024] if quick else [64, 256, 512, 1024, 2048], ROUNDS)
        self.log("decode:")
        m.decode = self.measure_decode([1, 4, 8] if quick else [1, 2, 4, 8, 16, 32], [256, 1024], 4 if quick else 8)
        self.log("resume:")
        m.resume_context, m.resume_generated = 1024, 40
        m.resume_hit_s, m.resume_cold_s = self.measure_resume(1024, 40, 2 if quick else 5)
        self._drain()
        self.llm.reset_prefix_cache()
        return m


def _spread(samples: list[float]) -> str:
    """The range of a size's rounds, where there were several."""
    if len(samples) < 2:
        return ""
    return f" (rounds {min(samples) * 1000:.1f}-{max(samples) * 1000:.1f})"


def bare_model_forward(
    model_dir: str, dtype: str, prompt_tokens: int = 256, steps: int = 8, seed: int = 0
) -> tuple[float, float]:
    """The bare model in transformers (no vLLM), same dtype and threads: seconds per prefill
    token and per batch-1 decode step. What the engine's own overhead is measured against."""
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=getattr(torch, dtype)).eval()
    ids = torch.from_numpy(np.random.default_rng(seed).integers(1000, 20000, size=(1, prompt_tokens)))
    with torch.inference_mode():
        model(ids[:, :16])  # first call allocates
        started = time.perf_counter()
        out = model(ids, use_cache=True)
        prefill = (time.perf_counter() - started) / prompt_tokens
        past, token = out.past_key_values, out.logits[:, -1:].argmax(-1)
        durations = []
        for _ in range(steps):
            started = time.perf_counter()
            out = model(token, past_key_values=past, use_cache=True)
            durations.append(time.perf_counter() - started)
            past, token = out.past_key_values, out.logits[:, -1:].argmax(-1)
    return prefill, statistics.median(durations)


@dataclass
class ProfileCheck:
    """A few quick measurements beside what a profile predicts for them."""

    rows: list[tuple[str, float, float]]  # (what, measured s, predicted s)

    def worst_error(self) -> float:
        return max(abs(m - p) / p for _, m, p in self.rows)

    def table(self) -> str:
        lines = [f"  {'':28s} {'measured':>10s} {'profile':>10s} {'error':>7s}"]
        for what, measured, predicted in self.rows:
            lines.append(
                f"  {what:28s} {measured * 1000:8.1f} ms {predicted * 1000:8.1f} ms "
                f"{(measured - predicted) / predicted * 100:+6.0f}%"
            )
        return "\n".join(lines)


def check_profile(profiler: EngineProfiler, profile: EngineProfile) -> ProfileCheck:
    """Cold prefill of 256 tokens and decode steps at batch 1 and 8 (context 256), against the
    profile's predictions: about half a minute on a CPU."""
    rows = []
    ((n, prefill_s),) = profiler.measure_prefill([256], ROUNDS)
    rows.append((f"prefill {n} tokens, cold", prefill_s, profile.step_s(1, n, prefill_tokens=n)))
    for batch, context, step_s in profiler.measure_decode([1, 8], [256], 4):
        rows.append((f"decode step, batch {batch}", step_s, profile.step_s(batch, batch * context)))
    return ProfileCheck(rows)


def _nonnegative_lstsq(a: np.ndarray, y: np.ndarray) -> list[float]:
    """Least squares with every coefficient >= 0 (noisy step times can make a cost look
    negative; clipping it afterwards would leave the others fitted to the wrong model): the
    best fit over the subsets of coefficients allowed to be non-zero."""
    best, best_error = [0.0] * a.shape[1], float("inf")
    for mask in range(1, 2 ** a.shape[1]):
        cols = [i for i in range(a.shape[1]) if mask >> i & 1]
        coef, *_ = np.linalg.lstsq(a[:, cols], y, rcond=None)
        if (coef < 0).any():
            continue
        error = float(np.sum((a[:, cols] @ coef - y) ** 2))
        if error < best_error:
            best, best_error = [0.0] * a.shape[1], error
            for i, c in zip(cols, coef):
                best[i] = float(c)
    return best


class DecodeFit(NamedTuple):
    """A decode step's cost, fitted: base + per_seq*(B-1) + per_ctx*(B*C) for B sequences of C
    context tokens each (the decode terms of EngineProfile.step_s)."""

    base_s: float
    per_seq_s: float
    per_context_token_s: float
    mean_relative_error: float

    @staticmethod
    def terms(batch: int, context_per_sequence: int) -> list[float]:
        return [1.0, batch - 1, batch * context_per_sequence]

    def step_s(self, batch: int, context_per_sequence: int) -> float:
        costs = (self.base_s, self.per_seq_s, self.per_context_token_s)
        return sum(t * c for t, c in zip(self.terms(batch, context_per_sequence), costs))


def fit_decode(rows: list[tuple[int, int, float]]) -> DecodeFit:
    """The decode fit through (batch, context per sequence, seconds) rows, by least squares
    with no cost negative."""
    a = np.array([DecodeFit.terms(b, c) for b, c, _ in rows])
    y = np.array([s for _, _, s in rows])
    base, per_seq, per_ctx = _nonnegative_lstsq(a, y)
    base = base or float(min(y))
    return DecodeFit(base, per_seq, per_ctx, float(np.mean(np.abs(a @ np.array([base, per_seq, per_ctx]) - y) / y)))


def fit_profile(
    m: ProfileMeasurements,
    name: str,
    model: str,
    hardware: str,
    kv_capacity_tokens: int,
    max_batched_tokens: int,
    kv_block_size: int,
) -> EngineProfile:
    # The planner prefills short prompts cold (a task's own text: tens to a few hundred tokens;
    # a resume's partial KV block); attention makes long cold prompts superlinear, so the line
    # is fitted on those sizes only.
    short = [(n, s) for n, s in m.prefill if n <= PREFILL_FIT_MAX_TOKENS]
    points = short if len(short) >= 2 else m.prefill
    tokens = np.array([n for n, _ in points], dtype=float)
    seconds = np.array([s for _, s in points])
    prefill_slope = max(0.0, float(np.polyfit(tokens, seconds, 1)[0]))
    base, per_seq, per_ctx, fit_error = fit_decode(m.decode)
    hit = statistics.median(m.resume_hit_s)
    cold = statistics.median(m.resume_cold_s)
    context = m.resume_context + m.resume_generated
    recompute = context % kv_block_size if kv_block_size else 0  # the partial KV block
    resume = max(0.0, hit - (base + per_ctx * context) - prefill_slope * recompute)
    assumptions = (
        f"Measured by `llm-planner profile-engine` on {time.strftime('%Y-%m-%d')}.\n"
        f"prefill (cold, median): {', '.join(f'{n} tok {s * 1000:.0f} ms' for n, s in m.prefill)}; slope fitted "
        f"up to {PREFILL_FIT_MAX_TOKENS} tokens.\n"
        f"decode (median step): {', '.join(f'B{b}/C{c} {s * 1000:.1f} ms' for b, c, s in m.decode)}; "
        f"linear fit, mean relative error {fit_error * 100:.1f}%.\n"
        f"resume of a {m.resume_context}-token context + {m.resume_generated} generated: {hit * 1000:.1f} ms "
        f"with the prefix cache vs {cold * 1000:.1f} ms cold re-prefill (ratio {cold / hit:.1f}x); a resume "
        f"recomputes the last partial KV block (kv_block_size) at the prefill rate, resume_s is what "
        f"remains beyond that and a decode step at that context.\n"
    )
    return EngineProfile(
        name=name,
        model=model,
        hardware=hardware,
        assumptions=assumptions,
        prefill_s_per_token=round(prefill_slope, 9),
        decode_base_s=round(base, 6),
        decode_s_per_seq=round(per_seq, 7),
        decode_s_per_context_token=round(per_ctx, 10),
        resume_s=round(resume, 6),
        kv_capacity_tokens=kv_capacity_tokens,
        max_batched_tokens=max_batched_tokens,
        prefix_caching=True,
        kv_block_size=kv_block_size,
    )


def profile_to_yaml(profile: EngineProfile) -> str:
    return yaml.safe_dump(profile.model_dump(), sort_keys=False, width=100)
