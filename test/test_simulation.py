"""End-to-end simulations through the real planner core (scheduler, batch controller,
segmenter, sim engine, simulated robots) on a virtual clock."""

import math

import pytest

from llm_planner.catalog.tokenizer import count_tokens
from llm_planner.domain.tasks import TaskRequest, TaskState
from llm_planner.domain.tuf import Tuf
from llm_planner.engine.sim import TEMPLATE_TOKENS
from llm_planner.lrtrace.composer import compose_preset, load_preset, mean_exec_times, preset_traces
from llm_planner.lrtrace.formats import Job, Workload
from llm_planner.lrtrace.metrics import by_level
from llm_planner.lrtrace.simulate import EventQueue, simulate
from llm_planner.planning.prompts import user_turn

POLICIES = ["timely", "fcfs", "edf", "vllm", "vllm-stream"]


@pytest.fixture(scope="module")
def traces():
    return preset_traces(load_preset("wid1"))


@pytest.fixture(scope="module")
def wid1_runs(config, tokenizer, traces):
    preset = load_preset("wid1")
    workload = compose_preset(preset, 0, traces, mean_exec_times(traces, config.robot_types))
    return workload, {p: simulate(workload, traces, p, config, 0, tokenizer) for p in POLICIES}


def with_batch(config, size):
    return config.model_copy(update={"batch": config.batch.model_copy(update={"max_batch_size": size})})


def backlog_workload(n_normal=30, urgent_at=0.05):
    jobs = [Job(job_id=i, arrival_s=i * 0.001, agent=i, trace_id=3) for i in range(n_normal)]
    jobs.append(Job(job_id=n_normal, arrival_s=urgent_at, agent=n_normal, trace_id=7))
    return Workload(name="backlog", duration_s=60, agents=n_normal + 1, jobs=jobs)


def test_every_task_reaches_a_terminal_state(wid1_runs):
    workload, runs = wid1_runs
    for policy, result in runs.items():
        assert len(result.records) == len(workload.jobs), policy
        assert {r.state for r in result.records} == {TaskState.SUCCEEDED}, policy
        assert all(r.units_executed > 0 and math.isfinite(r.response_time_s) for r in result.records)


def test_segments_of_a_task_execute_in_order(wid1_runs):
    _, runs = wid1_runs
    for policy, result in runs.items():
        for r in result.records:
            executed = [s for s in r.segments if s.calls]
            assert [s.index for s in r.segments] == list(range(len(r.segments)))
            for prev, nxt in zip(executed, executed[1:]):
                assert nxt.started_s >= prev.finished_s - 1e-9, (policy, r.request.task_id)
            assert "".join(s.text for s in r.segments) == r.plan == r.request.forced_plan


def test_resumed_generations_never_prefill_again(wid1_runs, tokenizer):
    _, runs = wid1_runs
    result = runs["timely"]
    stats = result.engine_stats
    assert sum(stats.resumes.values()) > len(result.records)  # most tasks were suspended and resumed
    # each task's own prompt is what the model reads of it (planning/prompts.py)
    own = sum(count_tokens(tokenizer, user_turn(r.request.instruction)) + TEMPLATE_TOKENS for r in result.records)
    assert sum(stats.prefill_tokens.values()) == own + stats.prefix_prefill_tokens


def test_baseline_shapes(wid1_runs):
    _, runs = wid1_runs
    assert all(len(r.segments) == 1 and r.segments[0].last for r in runs["vllm"].records)
    assert not runs["vllm-stream"].engine_stats.resumes
    stream = runs["vllm-stream"].records
    assert sum(len(r.segments) for r in stream) > 3 * len(stream)


def test_timely_beats_vllm_on_urgent_tasks(wid1_runs):
    _, runs = wid1_runs
    timely = by_level(runs["timely"].records)
    vllm = by_level(runs["vllm"].records)
    assert timely["urgent"]["utility_pct_of_max"] > vllm["urgent"]["utility_pct_of_max"]
    assert timely["urgent"]["waiting_mean_s"] < vllm["urgent"]["waiting_mean_s"]
    assert timely["normal"]["utility_pct_of_max"] > vllm["normal"]["utility_pct_of_max"] - 5


def first_dispatch(result):
    return {r.request.task_id: r.segments[0].dispatched_s for r in result.records}


def test_urgent_first_segment_overtakes_a_backlog(config, tokenizer, traces):
    workload = backlog_workload()
    contended = with_batch(config, 4)
    timely = first_dispatch(simulate(workload, traces, "timely", contended, 0, tokenizer))
    fcfs = first_dispatch(simulate(workload, traces, "fcfs", contended, 0, tokenizer))
    urgent = "job30"
    normals = [f"job{i}" for i in range(30)]
    assert sum(timely[n] > timely[urgent] for n in normals) >= 25
    assert timely[urgent] - 0.05 < 0.5  # within the urgent cutoff
    # the same backlog under FCFS keeps the urgent task behind most normal tasks
    assert sum(fcfs[n] > fcfs[urgent] for n in normals) <= 5


def test_late_tasks_are_still_planned(config, tokenizer, traces):
    workload = backlog_workload(n_normal=40)
    result = simulate(workload, traces, "timely", with_batch(config, 1), 0, tokenizer)
    assert {r.state for r in result.records} == {TaskState.SUCCEEDED}
    late = [r for r in result.records if r.response_time_s > r.request.tuf.cutoff_s]
    assert late and all(r.utility < r.max_utility for r in late)


def run_planner(config, tokenizer, requests):
    """The planner with the sim engine and simulated robots, driven by hand."""
    from llm_planner.dispatch.robot_port import CallTimeSource, SimRobots
    from llm_planner.domain.clock import VirtualClock
    from llm_planner.engine import SimEngine, load_engine_profile
    from llm_planner.planning.planner import Planner
    from llm_planner.sched.queues import get_policy

    clock, events, statuses = VirtualClock(), EventQueue(), []
    holder = {}
    robots = SimRobots(events.push, clock.now, CallTimeSource(0), lambda t: holder["p"].robot_models(t))
    planner = Planner(config, get_policy("timely"), SimEngine(load_engine_profile(config.engine_profile), tokenizer, clock),
                      clock, robots, statuses.append)
    holder["p"] = planner
    robots.attach(planner)
    for r in requests:
        planner.submit(r)
    while True:
        while events and events.next_time() <= clock.now():
            events.pop()()
        if not planner.step():
            if not events:
                break
            clock.advance_to(events.next_time())
    return planner, statuses


def request(task_id, plan="mf(50);tp();", instruction="Scene: [door]. Fly forward.", robot_type="tello"):
    return TaskRequest(task_id, "drone1", robot_type, instruction, "normal", Tuf(1, 1, 1.5), 0.0, plan)


def test_bad_tasks_are_rejected_with_a_reason_and_the_rest_run(config, tokenizer):
    planner, statuses = run_planner(config, tokenizer, [
        request("ok"),
        request("ok"),  # duplicate id
        request("no-plan", plan=None),
        request("empty", instruction="   "),
        request("huge", instruction="x" * (64 * 1024 + 1)),
        request("robot", robot_type="submarine"),
        request("no-calls", plan="I am not sure what to do."),
    ])
    final = {s.task_id: s for s in statuses if s.state.terminal and s.task_id != "ok"}
    assert planner.records["ok"].state == TaskState.SUCCEEDED
    assert [s.message for s in statuses if s.task_id == "ok" and s.state == TaskState.REJECTED] == ["duplicate task_id 'ok'"]
    assert "no recorded plan" in final["no-plan"].message and final["no-plan"].state == TaskState.REJECTED
    assert final["empty"].message == "empty instruction"
    assert "longer than" in final["huge"].message
    assert "unknown robot type" in final["robot"].message
    assert final["no-calls"].state == TaskState.FAILED and "no executable skill call" in final["no-calls"].message


def test_status_sequence_of_a_segmented_task(config, tokenizer):
    planner, statuses = run_planner(config, tokenizer, [request("t", plan="mf(50);tc(90);")])
    states = [s.state.name for s in statuses]
    assert states == ["QUEUED", "GENERATING", "EXECUTING", "SUSPENDED", "GENERATING", "EXECUTING", "SUCCEEDED"]
    executing = [s for s in statuses if s.state == TaskState.EXECUTING]
    assert [(s.segment_index, s.segment_text) for s in executing] == [(0, "mf(50);"), (1, "tc(90);")]
    done = statuses[-1]
    assert done.utility == pytest.approx(planner.records["t"].utility) and done.response_time_s < 1.0


def test_measured_call_times_are_kept_for_refits(config, tokenizer):
    planner, _ = run_planner(config, tokenizer, [request("m", plan="mf(50);tc(90);")])
    record = planner.records["m"]
    measured = [t for s in record.segments for t in s.call_times_s]
    assert [(rt, skill, arg) for rt, skill, arg, _ in planner.exec_samples] == [("tello", "mf", 50.0), ("tello", "tc", 90.0)]
    assert [sec for *_, sec in planner.exec_samples] == measured


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


def test_profile_fit_recovers_the_engine_costs_it_was_measured_with():
    """fit_profile on measurements made from known costs gives those costs back."""
    from llm_planner.engine.profiler import ProfileMeasurements, fit_profile

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
