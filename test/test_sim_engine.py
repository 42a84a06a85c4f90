"""The sim engine against the real one's costs: KV blocks on resume and prefill, eviction
of suspended contexts, and the profile fit."""


import pytest
from driven import run_planner

from llm_planner.catalog.tokenizer import count_tokens
from llm_planner.domain.tasks import TaskRequest, TaskState
from llm_planner.domain.tuf import Tuf
from llm_planner.engine.sim import TEMPLATE_TOKENS
from llm_planner.planning.prompts import user_turn


def test_sim_resume_recomputes_the_partial_kv_block_when_the_profile_models_blocks(tokenizer):
    """A profile with kv_block_size (as measured on vLLM) charges a resumed generation the
    tokens of its last partial KV block as prefill; one without it charges nothing."""
    from llm_planner.domain.clock import VirtualClock
    from llm_planner.engine import GenerationRequest, SimEngine, load_engine_profile

    base = load_engine_profile("smollm2-135m-instruct-bfloat16-cpu-avx512-bf16")
    for block in (0, 32):
        engine = SimEngine(base.model_copy(update={"kv_block_size": block}), tokenizer, VirtualClock())
        request = GenerationRequest("g", "k", "system prompt text", "fly to the door", forced_output="mf(50);tc(90);")
        engine.add(request)
        while not engine.step().outputs:  # prompt prefilled, first token out
            pass
        engine.suspend("g")
        before, context = engine.stats.prefill_tokens["g"], engine.context_tokens("g")
        assert context % 32  # a partial block exists, so the check below can fail
        engine.resume("g")
        engine.step()
        assert engine.stats.prefill_tokens["g"] - before == (context % block if block else 0)


def test_sim_prompts_prefill_what_earlier_prompts_blocks_do_not_cover_as_the_real_engine_counts(tokenizer):
    """With a profile that models KV blocks, a prompt after its warmed-up skill set's prefix
    prefills from the prefix's last partial block on, the same prompt again only its own last
    partial block, and each prefills what prompt_tokens predicted before it was added."""
    from llm_planner.domain.clock import VirtualClock
    from llm_planner.engine import GenerationRequest, SimEngine, load_engine_profile

    profile = load_engine_profile("smollm2-135m-instruct-bfloat16-cpu-avx512-bf16")
    assert profile.kv_block_size == 32
    engine = SimEngine(profile, tokenizer, VirtualClock())
    system = "You plan for a drone. Skills: mf(cm) moves forward, tc(deg) turns clockwise. " * 4
    task = "Scene: [door, cup]. Fly to the door, then turn around and come back to the cup."
    engine.warm_up([GenerationRequest("warm-up/k", "k", system, "warm-up", forced_output="")])
    prefix, own = count_tokens(tokenizer, system), count_tokens(tokenizer, task) + TEMPLATE_TOKENS
    assert prefix % 32 and (prefix + own) % 32  # partial blocks exist, so the checks below can fail
    warmed = (prefix + TEMPLATE_TOKENS) // 32 * 32  # the blocks the warm-up's prompt shares with the task's
    predicted, prefilled = [], []
    for gen_id in ("first", "again"):
        request = GenerationRequest(gen_id, "k", system, task, forced_output="mf(50);")
        predicted.append(engine.prompt_tokens(request))
        engine.add(request)
        while gen_id in engine.running:
            if any(o.finished for o in engine.step().outputs):
                engine.release(gen_id)
        prefilled.append(engine.stats.prefill_tokens[gen_id])
    assert prefilled == predicted
    assert predicted == [prefix + own - warmed, (prefix + own) % 32]


def test_sim_evicts_the_context_suspended_longest_ago_when_running_ones_need_the_space(tokenizer):
    """Suspended contexts stay cached (a resume prefills only the partial block) while the
    running generations leave room; past that the oldest is evicted, and its resume prefills
    its prompt and plan so far again. Free space counts only what cached contexts cannot take."""
    from llm_planner.domain.clock import VirtualClock
    from llm_planner.engine import GenerationRequest, SimEngine, load_engine_profile

    requests = [GenerationRequest(g, "k", "system prompt text", f"fly to the door {g}", forced_output="mf(50);tc(90);")
                for g in ("old", "recent", "new")]
    base = load_engine_profile("smollm2-135m-instruct-bfloat16-cpu-avx512-bf16").model_copy(
        update={"kv_block_size": 0})

    def run(capacity):
        """Two generations run 3 steps and are suspended, oldest first; a third joins and
        runs a step; the two resume and run a step. Returns the engine and what it reported."""
        engine = SimEngine(base.model_copy(update={"kv_capacity_tokens": capacity}), tokenizer, VirtualClock())
        uncached = engine.prompt_tokens(requests[0])
        for r in requests[:2]:
            engine.add(r)
        seen = {"prefix": uncached - engine.prompt_tokens(requests[0])}  # cached by the first add
        for _ in range(3):
            engine.step()
        for g in ("old", "recent"):
            before = engine.kv_free_tokens()
            engine.suspend(g)
            seen[g] = engine.kv_free_tokens() - before  # its context, now cached
        seen["suspended"] = engine.kv_free_tokens()
        engine.add(requests[2])
        seen["new"] = seen["suspended"] - engine.kv_free_tokens()
        engine.step()
        seen["prefilled"] = dict(engine.stats.prefill_tokens)
        for g in ("old", "recent"):
            engine.resume(g)
        engine.step()
        return engine, seen

    _, roomy = run(100_000)
    assert roomy["suspended"] == 100_000 - roomy["prefix"]  # cached contexts are not counted as taken
    tight = roomy["prefix"] + roomy["new"] + roomy["recent"]  # the newcomer's prompt and one cached context
    for capacity, evicted in ((100_000, set()), (tight, {"old"})):
        engine, seen = run(capacity)
        for g in ("old", "recent"):
            recomputed = engine.stats.prefill_tokens[g] - seen["prefilled"][g]
            assert recomputed == (seen[g] if g in evicted else 0), (capacity, g)


def test_suspended_plans_that_outgrow_the_kv_space_do_not_stall_the_planner(config, tokenizer):
    """The paper's algorithm suspends every plan after each segment. Where their contexts
    would fill the engine's KV space, the oldest give way (and prefill again on resuming):
    held, nothing could be admitted and every task would wait for ever."""
    from llm_planner.engine import SimEngine

    class SmallKv(SimEngine):
        def __init__(self, profile, tokenizer, clock):
            super().__init__(profile.model_copy(update={"kv_capacity_tokens": 2_000}), tokenizer, clock)

    plan = "mf(50);tc(90);mf(50);tc(90);mf(50);tp();"
    requests = [TaskRequest(f"t{i}", f"drone{i}", "tello", f"Scene: [door]. Fly forward, task {i}.", "normal",
                            Tuf(1, 1, 1.5), 0.0, plan) for i in range(24)]
    planner, _ = run_planner(config, tokenizer, requests, policy="timelyllm-paper", engine_class=SmallKv)
    assert {r.state for r in planner.records.values()} == {TaskState.SUCCEEDED}
    stats = planner.engine.stats
    own = sum(count_tokens(tokenizer, user_turn(r.instruction)) + TEMPLATE_TOKENS for r in requests)
    assert sum(stats.prefill_tokens.values()) > own + stats.prefix_prefill_tokens  # some contexts were evicted


def test_profile_fit_recovers_the_engine_costs_it_was_measured_with():
    """fit_profile on measurements made from known costs gives those costs back."""
    from llm_planner.engine.profiler import ProfileMeasurements, fit_decode, fit_profile

    prefill, base, per_seq, per_ctx, resume, block = 0.0012, 0.02, 0.0015, 2.5e-6, 0.007, 32
    m = ProfileMeasurements()
    m.prefill = [(n, 0.01 + prefill * n) for n in (64, 256, 1024, 2048)]
    m.decode = [(b, c, base + per_seq * (b - 1) + per_ctx * b * c) for b in (1, 4, 16) for c in (256, 1024)]
    m.resume_context, m.resume_generated = 1024, 40
    context = 1064
    hit = base + per_ctx * context + prefill * (context % block) + resume
    m.resume_hit_s, m.resume_cold_s = [hit] * 3, [0.01 + prefill * context] * 3
    p = fit_profile(m, "t", "model", "hw", kv_capacity_tokens=1000, max_batched_tokens=2048, kv_block_size=block)
    assert p.prefill_s_per_token == pytest.approx(prefill, rel=1e-3)
    assert (p.decode_base_s, p.decode_s_per_seq) == (pytest.approx(base, rel=1e-3), pytest.approx(per_seq, rel=1e-3))
    assert p.decode_s_per_context_token == pytest.approx(per_ctx, rel=1e-3)
    assert p.resume_s == pytest.approx(resume, rel=1e-2)
    assert p.kv_block_size == block
    fit = fit_decode(m.decode)  # its step for B sequences of C tokens is the profile's for B*C in all
    for b, c in ((1, 256), (8, 256), (16, 1024)):
        assert fit.step_s(b, c) == pytest.approx(p.step_s(b, b * c), rel=1e-9)
