"""The engine profiler's measurements on a shared machine: a slow spell must not move a size's
figure. An engine with known step costs on a fake clock stands in for vLLM; the profiler
drives it through the same calls it makes on a vLLM LLMEngine."""

from dataclasses import dataclass, field
from types import SimpleNamespace

import pytest

from llm_planner.engine.profiler import EngineProfiler

BASE_S, PER_SEQ_S, PREFILL_PER_TOKEN_S = 0.010, 0.002, 0.0005


@dataclass
class _Request:
    prompt_tokens: int
    max_tokens: int
    generated: int = 0


@dataclass
class CostedEngine:
    """An LLMEngine whose steps cost BASE_S + PER_SEQ_S a further sequence + PREFILL_PER_TOKEN_S
    a prompt token prefilled, `slow_factor` times as much during its first `slow_steps` steps."""

    slow_steps: int = 0
    slow_factor: float = 3.0
    now: float = 0.0
    steps: int = 0
    requests: dict[str, _Request] = field(default_factory=dict)

    def add_request(self, rid, prompt, params):
        self.requests[rid] = _Request(len(prompt["prompt_token_ids"]), params.max_tokens)

    def has_unfinished_requests(self):
        return bool(self.requests)

    def reset_prefix_cache(self):
        return True

    def step(self):
        running = list(self.requests.items())
        prefill = sum(r.prompt_tokens for _, r in running if r.generated == 0)
        cost = BASE_S + PER_SEQ_S * max(0, len(running) - 1) + PREFILL_PER_TOKEN_S * prefill
        self.now += cost * (self.slow_factor if self.steps < self.slow_steps else 1.0)
        self.steps += 1
        outputs = []
        for rid, request in running:
            request.generated += 1
            completion = SimpleNamespace(token_ids=[1] * request.generated)
            outputs.append(SimpleNamespace(request_id=rid, outputs=[completion]))
            if request.generated >= request.max_tokens:
                del self.requests[rid]
        return outputs


class CostedProfiler(EngineProfiler):
    def _sampling(self, max_tokens):
        return SimpleNamespace(max_tokens=max_tokens)


def profiler_on(llm: CostedEngine) -> CostedProfiler:
    engine = SimpleNamespace(llm=llm, tokenizer=range(50_000), kv_capacity_tokens=100_000)
    return CostedProfiler(engine, log=lambda _: None, timer=lambda: llm.now)


def decode_step_s(batch: int) -> float:
    return BASE_S + PER_SEQ_S * (batch - 1)


def test_a_slow_spell_over_a_whole_round_leaves_every_decode_figure_alone():
    llm = CostedEngine(slow_steps=24)  # the first of three rounds: 8 steps a size
    rows = profiler_on(llm).measure_decode([1, 4, 8], [64], steps=4, rounds=3)
    assert [(b, c) for b, c, _ in rows] == [(1, 64), (4, 64), (8, 64)]
    assert [s for _, _, s in rows] == pytest.approx([decode_step_s(b) for b in (1, 4, 8)])


def test_measured_one_size_after_another_the_same_spell_moves_the_first_sizes():
    """What the rounds are for: in one pass the spell lands on the first sizes whole."""
    llm = CostedEngine(slow_steps=16)  # the first two sizes, 8 steps each
    rows = profiler_on(llm).measure_decode([1, 4, 8], [64], steps=4, rounds=1)
    assert rows[0][2] == pytest.approx(3 * decode_step_s(1))
    assert rows[-1][2] == pytest.approx(decode_step_s(8))


def test_a_slow_spell_over_a_whole_round_leaves_every_prefill_figure_alone():
    llm = CostedEngine(slow_steps=2)  # both lengths' first measurement
    rows = profiler_on(llm).measure_prefill([64, 256], repeats=3)
    assert rows == [(64, pytest.approx(BASE_S + PREFILL_PER_TOKEN_S * 64)),
                    (256, pytest.approx(BASE_S + PREFILL_PER_TOKEN_S * 256))]


def test_rounds_alternate_direction_through_the_sizes():
    """A drift within a round weighs on the first and the last sizes alike."""
    llm = CostedEngine()
    seen = []
    profiler = profiler_on(llm)
    measure = profiler._decode_step_s
    profiler._decode_step_s = lambda prompts, steps: seen.append(len(prompts)) or measure(prompts, steps)
    profiler.measure_decode([1, 2, 4], [32], steps=2, rounds=3)
    assert seen == [1, 2, 4, 4, 2, 1, 1, 2, 4]


def test_a_size_that_does_not_fit_the_kv_cache_is_skipped_and_said():
    llm = CostedEngine()
    said = []
    engine = SimpleNamespace(llm=llm, tokenizer=range(50_000), kv_capacity_tokens=300)
    rows = CostedProfiler(engine, log=said.append, timer=lambda: llm.now).measure_decode([1, 8], [64], steps=2)
    assert [b for b, _, _ in rows] == [1]
    assert any("batch   8" in line and "skipped" in line for line in said)
