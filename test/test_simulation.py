"""End-to-end simulations through the real planner core (scheduler, batch controller,
segmenter, sim engine, simulated robots) on a virtual clock."""

import math
from collections import defaultdict

import pytest

from llm_planner.catalog.tokenizer import count_tokens
from llm_planner.domain.tasks import TaskRequest, TaskState
from llm_planner.domain.tuf import Tuf
from llm_planner.engine.base import EngineError
from llm_planner.engine.sim import TEMPLATE_TOKENS
from llm_planner.lrtrace.composer import compose_preset, load_preset, mean_exec_times, preset_traces
from llm_planner.lrtrace.formats import Job, Workload
from llm_planner.lrtrace.metrics import by_level
from llm_planner.lrtrace.simulate import EventQueue, simulate
from llm_planner.planning.prompts import user_turn

POLICIES = ["timely", "timelyllm-paper", "fcfs", "edf", "vllm", "vllm-stream", "rtlm"]


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


def backlog_workload(n_normal=30, urgent_at=0.05, trace_ids=(3,)):
    jobs = [Job(job_id=i, arrival_s=i * 0.001, agent=i, trace_id=trace_ids[i % len(trace_ids)])
            for i in range(n_normal)]
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
            assert "".join(s.text for s in r.segments) == r.plan == r.request.recorded_plan


def test_resumed_generations_never_prefill_again(wid1_runs, tokenizer):
    _, runs = wid1_runs
    result = runs["timelyllm-paper"]  # pauses after every segment
    stats = result.engine_stats
    assert sum(stats.resumes.values()) > len(result.records)  # most tasks were suspended and resumed
    # each task's own prompt is what the model reads of it (planning/prompts.py)
    own = sum(count_tokens(tokenizer, user_turn(r.request.instruction)) + TEMPLATE_TOKENS for r in result.records)
    assert sum(stats.prefill_tokens.values()) == own + stats.prefix_prefill_tokens


def test_a_simulation_starts_with_the_skill_set_prompts_cached_as_the_planner_node_does(wid1_runs, tokenizer):
    """The node warms its engine before it takes tasks: the first task of a skill set does
    not prefill the skill set's system prompt, in simulation either."""
    _, runs = wid1_runs
    for policy, result in runs.items():
        assert result.engine_stats.prefix_prefill_tokens == 0, policy
        first = min(result.records, key=lambda r: r.request.arrival_s)
        own = count_tokens(tokenizer, user_turn(first.request.instruction)) + TEMPLATE_TOKENS
        assert result.engine_stats.prefill_tokens[first.request.task_id] == own, policy


def test_baseline_shapes(wid1_runs):
    _, runs = wid1_runs
    for whole_plans in ("vllm", "rtlm"):
        assert all(len(r.segments) == 1 and r.segments[0].last for r in runs[whole_plans].records)
    assert not runs["rtlm"].engine_stats.resumes
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


def run_planner(config, tokenizer, requests, policy="timely", engine_class=None, then=(), watch_s=None,
                keep_finished=None, each_step=None, times=None):
    """The planner with the sim engine (or `engine_class`, a SimEngine) and simulated robots,
    driven by hand until idle; then the requests of `then` are submitted and driven too.
    `watch_s`: the engine runs under a watchdog with this time limit (a plain SimEngine replaces it).
    `each_step(planner)` is called after every planner step. `times`: the robots' CallTimeSource."""
    from llm_planner.dispatch.robot_port import CallTimeSource, SimRobots
    from llm_planner.domain.clock import VirtualClock
    from llm_planner.engine import SimEngine, load_engine_profile
    from llm_planner.engine.watchdog import WatchedEngine
    from llm_planner.planning.planner import Planner
    from llm_planner.sched.queues import get_policy

    clock, events, statuses = VirtualClock(), EventQueue(), []
    profile = load_engine_profile(config.engine_profile)
    engine = (engine_class or SimEngine)(profile, tokenizer, clock)
    if watch_s is not None:
        engine = WatchedEngine(engine, watch_s, lambda: SimEngine(profile, tokenizer, clock))
    planner = Planner(config, get_policy(policy), engine, clock,
                      lambda listener: SimRobots(events.push, clock.now, times or CallTimeSource(0), listener),
                      statuses.append, keep_finished=keep_finished)
    for batch in (requests, then):
        for r in batch:
            planner.submit(r)
        while True:
            while events and events.next_time() <= clock.now():
                events.pop()()
            if not planner.step():
                if not events:
                    break
                clock.advance_to(events.next_time())
            elif each_step is not None:
                each_step(planner)
    return planner, statuses


def test_an_engine_fault_loses_no_generation_and_the_planner_goes_on(config, tokenizer):
    """An exception inside an engine step loses the generations inside the engine: the
    engine is restarted, each goes on from the plan the planner received (the same plan as
    without the fault), and later tasks are planned."""
    from llm_planner.engine import SimEngine

    class FailsOnce(SimEngine):
        restarts = 0

        def step(self):
            if self.stats.steps == 4 and not FailsOnce.restarts:
                raise EngineError("device lost (injected)")
            return super().step()

        def restart(self):
            FailsOnce.restarts += 1
            super().restart()

    planner, statuses = run_planner(config, tokenizer, [request("a"), request("b")], engine_class=FailsOnce,
                                    then=[request("c")])
    assert FailsOnce.restarts == 1
    for task_id in ("a", "b"):
        record = planner.records[task_id]
        assert record.state == TaskState.SUCCEEDED and record.plan == "mf(50);tp();"
        lost = [s for s in statuses if s.task_id == task_id and s.state == TaskState.SUSPENDED]
        assert len(lost) == 1
        assert lost[0].message.startswith("engine step failed (EngineError: device lost (injected)); the engine "
                                          "was restarted; the plan goes on from its ")
        assert not lost[0].message.endswith("its 0 tokens")  # it had begun: it went on, not over
    assert planner.records["c"].state == TaskState.SUCCEEDED
    assert [s.state for s in statuses if s.task_id == "c"][-1] == TaskState.SUCCEEDED
    assert not planner.engine.running and planner.active_tasks == 0


def test_a_generation_lost_with_its_engine_twice_fails_with_the_reason(config, tokenizer):
    """A fault that comes back after the restart (one that may follow the generation) does not
    loop: a generation lost a second time fails, and the planner goes on."""
    from llm_planner.engine import SimEngine

    class FailsTwice(SimEngine):
        restarts = 0
        failing_steps = (4, 2)  # in the engine's first life and, with "a" inside again, in its second

        def step(self):
            lives = FailsTwice.failing_steps
            if FailsTwice.restarts < len(lives) and self.stats.steps == lives[FailsTwice.restarts]:
                raise EngineError("device lost (injected)")
            return super().step()

        def restart(self):
            FailsTwice.restarts += 1
            super().restart()

    planner, statuses = run_planner(config, tokenizer, [request("a")], engine_class=FailsTwice, then=[request("c")])
    assert FailsTwice.restarts == 2
    record = planner.records["a"]
    assert record.state == TaskState.FAILED
    assert record.message == ("engine step failed (EngineError: device lost (injected)); the engine was restarted, "
                              "a second time")
    assert planner.records["c"].state == TaskState.SUCCEEDED
    assert planner.active_tasks == 0


def test_an_engine_that_stops_answering_is_replaced_and_the_planner_goes_on(config, tokenizer):
    """An engine step that never returns is given up after the time limit, with the reason;
    a new engine goes on with the generations that were inside and plans the later tasks."""
    import threading

    from llm_planner.engine import SimEngine

    never = threading.Event()

    class HangsOnce(SimEngine):
        def step(self):
            if self.stats.steps == 2:
                never.wait()  # a call that does not come back
            return super().step()

    try:
        planner, statuses = run_planner(config, tokenizer, [request("a"), request("b")], engine_class=HangsOnce,
                                        then=[request("c")], watch_s=0.5)
    finally:
        never.set()  # let the abandoned thread go
    for task_id in ("a", "b"):
        assert planner.records[task_id].state == TaskState.SUCCEEDED  # they went on in the replacement
        assert any("(EngineHung: the engine's step did not return within 0.5 s); the engine was restarted; the plan "
                   "goes on" in s.message for s in statuses if s.task_id == task_id and s.state == TaskState.SUSPENDED)
    assert type(planner.engine.inner) is SimEngine  # the replacement
    assert planner.records["c"].state == TaskState.SUCCEEDED
    assert [s.state for s in statuses if s.task_id == "c"][-1] == TaskState.SUCCEEDED
    assert not planner.engine.running and planner.active_tasks == 0


def test_a_shared_engine_that_stops_answering_is_replaced_for_the_runs_after_it(config, tokenizer, traces):
    """`lrtrace compare`/`replay` reuse one watched engine across runs: after a hung step the
    replacement goes on with the generations inside, on the run's clock, and
    serves the next run (also after a run closed the watchdog's thread) exactly as a new
    engine would."""
    import threading

    from llm_planner.domain.clock import VirtualClock
    from llm_planner.engine import SimEngine, load_engine_profile
    from llm_planner.engine.watchdog import WatchedEngine

    never = threading.Event()

    class HangsOnce(SimEngine):
        def step(self):
            if self.stats.steps == 3:
                never.wait()  # a call that does not come back
            return super().step()

    profile = load_engine_profile(config.engine_profile)
    engine = WatchedEngine(HangsOnce(profile, tokenizer, VirtualClock()), 0.5,
                           lambda: SimEngine(profile, tokenizer, VirtualClock()))
    workload = backlog_workload(n_normal=6)
    clocks = []  # each run's clock, as the run hands it to the engine
    reset = engine.reset
    engine.reset = lambda clock: (clocks.append(clock), reset(clock))
    try:
        first = simulate(workload, traces, "timely", config, 0, tokenizer, engine=engine)
        assert engine.inner.clock is clocks[0]  # the replacement went on with the first run
        engine.close()  # as a live run's planner node does when it is destroyed
        second = simulate(workload, traces, "timely", config, 0, tokenizer, engine=engine)
    finally:
        never.set()  # let the abandoned thread go
    assert len(first.records) == len(workload.jobs)
    assert {r.state for r in first.records} == {TaskState.SUCCEEDED}  # those inside went on in the replacement
    assert type(engine.inner) is SimEngine
    fresh = simulate(workload, traces, "timely", config, 0, tokenizer,
                     engine=SimEngine(profile, tokenizer, VirtualClock()))
    assert [(r.request.task_id, r.state, r.response_time_s, r.utility) for r in second.records] == \
        [(r.request.task_id, r.state, r.response_time_s, r.utility) for r in fresh.records]


def test_a_long_running_planner_keeps_only_the_latest_finished_records(config, tokenizer):
    """Memory stays bounded; a duplicate task_id is still found among the
    records kept."""
    planner, statuses = run_planner(config, tokenizer, [request(t) for t in "abcde"], keep_finished=2,
                                    then=[request("e")])
    assert sorted(planner.records) == ["d", "e"]
    assert [s.message for s in statuses if s.task_id == "e" and s.state == TaskState.REJECTED] == [
        "duplicate task_id 'e'"]
    assert [s.state for s in statuses if s.task_id == "a"][-1] == TaskState.SUCCEEDED


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
    rejected = [s.message for s in statuses if s.task_id == "ok" and s.state == TaskState.REJECTED]
    assert rejected == ["duplicate task_id 'ok'"]
    assert "no recorded plan" in final["no-plan"].message and final["no-plan"].state == TaskState.REJECTED
    assert final["empty"].message == "empty instruction"
    assert "longer than" in final["huge"].message
    assert "unknown robot type" in final["robot"].message
    assert final["no-calls"].state == TaskState.FAILED and "no executable skill call" in final["no-calls"].message


def test_status_sequence_of_a_segmented_task(config, tokenizer):
    planner, statuses = run_planner(config, tokenizer, [request("t", plan="mf(50);tc(90);")], "timelyllm-paper")
    states = [s.state.name for s in statuses]
    assert states == ["QUEUED", "GENERATING", "EXECUTING", "SUSPENDED", "GENERATING", "EXECUTING", "SUCCEEDED"]
    executing = [s for s in statuses if s.state == TaskState.EXECUTING]
    assert [(s.segment_index, s.segment_text) for s in executing] == [(0, "mf(50);"), (1, "tc(90);")]


def test_timely_streams_without_pausing_when_the_engine_keeps_up(config, tokenizer):
    """A fast engine (the GPU profile) and a 2 s move: the next segment is ready long before
    the robot is free, so both go out as they are generated and the generation never pauses."""
    planner, statuses = run_planner(config, tokenizer, [request("t", plan="mf(50);tc(90);")])
    assert [s.state.name for s in statuses] == ["QUEUED", "GENERATING", "EXECUTING", "EXECUTING", "SUCCEEDED"]
    record = planner.records["t"]
    assert [s.unit_calls for s in record.segments] == [[1], [1]]
    assert record.utility == record.max_utility == 2.0
    done = statuses[-1]
    assert done.utility == pytest.approx(planner.records["t"].utility) and done.response_time_s < 1.0


def test_the_planner_learns_how_long_its_segments_typically_are(config, tokenizer):
    """Segments priced at l_max (10 tokens for the drone) before any is generated; after a
    plan, at the mean of the segments with a skill call that its skill set's plans had."""
    from llm_planner.catalog.skills import load_skill_set

    planner, _ = run_planner(config, tokenizer, [request("a", plan="mf(50);tc(90);")])
    skill_set = load_skill_set("minispec_drone")
    tokens = [count_tokens(tokenizer, s) for s in ("mf(50);", "tc(90);")]
    assert sum(tokens) / 2 < skill_set.segment_tokens
    assert planner.observed_segments.mean("minispec_drone") == pytest.approx(sum(tokens) / 2)
    planner.submit(request("b", plan="mf(50);"))
    gen = planner._gens["b"]
    assert gen.expected_segment_tokens == skill_set.segment_tokens
    assert gen.typical_segment_tokens == pytest.approx(sum(tokens) / 2)
    assert planner.observed_segments.mean("python_arm") is None  # nothing seen: l_max stands


def test_measured_call_times_are_kept_for_refits(config, tokenizer):
    planner, _ = run_planner(config, tokenizer, [request("m", plan="mf(50);tc(90);")])
    record = planner.records["m"]
    measured = [t for s in record.segments for t in s.call_times_s]
    samples = [(rt, skill, arg) for rt, skill, arg, _ in planner.exec_samples]
    assert samples == [("tello", "mf", 50.0), ("tello", "tc", 90.0)]
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


class _Reports:
    """Stands in for the planner: records what the simulated robots report."""

    def __init__(self):
        self.started, self.finished = [], []
        self.models = {}

    def robot_models(self, task_id):
        return self.models[task_id]

    def segment_started(self, task_id, index, t):
        self.started.append((task_id, index, round(t, 6)))

    def segment_finished(self, task_id, index, success, call_times_s, message, t):
        self.finished.append((task_id, index, round(t, 6)))


def _sim_robots():
    from llm_planner.catalog.exec_model import load_exec_model
    from llm_planner.catalog.skills import load_skill_set
    from llm_planner.dispatch.robot_port import CallTimeSource, SimRobots
    from llm_planner.domain.clock import VirtualClock

    drone = load_skill_set("minispec_drone"), load_exec_model("tello")
    clock, events, reports = VirtualClock(), EventQueue(), _Reports()
    reports.models = defaultdict(lambda: drone)
    robots = SimRobots(events.push, clock.now, CallTimeSource(0), reports)

    def run_until(t):
        while events and events.next_time() <= t:
            clock.advance_to(max(clock.now(), events.next_time()))
            events.pop()()
        clock.advance_to(t)

    def segment(index, text, last):
        from llm_planner.domain.tasks import DispatchedSegment

        calls = drone[0].find_calls(text)
        return DispatchedSegment(index, text, calls, [len(calls)], last, clock.now())

    return robots, reports, run_until, segment


def test_a_robot_runs_one_task_to_its_end_before_the_next():
    """As the ROS robot server does: task b's segment waits while task a is mid-plan, even
    when a's next segment comes later; the robot starts it the moment a's previous one ends."""
    robots, reports, run_until, segment = _sim_robots()
    robots.dispatch("r", "a", segment(0, "d(2);", last=False))
    robots.dispatch("r", "b", segment(0, "d(1);", last=True))
    run_until(3.0)  # a's first segment ended at 2.0; its second comes at 3.0
    robots.dispatch("r", "a", segment(1, "d(1);", last=True))
    run_until(10.0)
    assert [s[:2] for s in reports.started] == [("a", 0), ("a", 1), ("b", 0)]
    assert reports.started[1][2] == 3.0 and reports.started[2][2] == 4.0  # b right after a's end


def test_a_robot_moves_on_when_its_task_goes_quiet():
    from llm_planner.dispatch.robot_queue import TASK_HOLD_S

    robots, reports, run_until, segment = _sim_robots()
    robots.dispatch("r", "a", segment(0, "d(1);", last=False))  # a never sends its last segment
    robots.dispatch("r", "b", segment(0, "d(1);", last=True))
    run_until(30.0)
    assert reports.started[-1] == ("b", 0, 1.0 + TASK_HOLD_S)


def ends_with_eos(profile, tokenizer, clock):
    """A SimEngine whose plans end as a model's do: the last text token, then one more step
    with the end-of-sequence token, which adds no text."""
    import dataclasses

    from llm_planner.engine import SimEngine
    from llm_planner.engine.base import TokenOutput

    class EndsWithEos(SimEngine):
        def step(self):
            result = super().step()
            return dataclasses.replace(result, outputs=[
                TokenOutput(o.gen_id, o.text, o.finished and not o.text, o.truncated) for o in result.outputs])

    return EndsWithEos(profile, tokenizer, clock)


@pytest.mark.parametrize("policy", ["timely", "vllm-stream", "timelyllm-paper"])
def test_a_plan_that_ends_after_its_last_segment_frees_its_robot_at_once(config, tokenizer, policy):
    """The end-of-sequence step comes after the plan's last segment was sent: an empty last
    segment tells the robot that the plan has ended, and the robot's next task starts as soon
    as it is sent (not after the robot's hold for the first task's next segment)."""
    planner, _ = run_planner(config, tokenizer, [request("a")], policy=policy, engine_class=ends_with_eos,
                             then=[request("b")])
    first, second = planner.records["a"], planner.records["b"]
    assert first.state == second.state == TaskState.SUCCEEDED
    assert first.plan == "mf(50);tp();" and "".join(s.text for s in first.segments) == first.plan
    assert first.segments[-1].last and [s.last for s in first.segments].count(True) == 1
    assert second.segments[0].dispatched_s > first.finished_s
    assert second.segments[0].started_s == second.segments[0].dispatched_s


def test_shrinking_the_batch_speeds_up_an_urgent_first_segment(config, tokenizer, traces):
    """An urgent task joins 30 running plans: `timely` suspends the generations that can wait
    for it at no loss, so its first segment decodes at a smaller batch than without shrinking."""
    workload = backlog_workload(urgent_at=0.3)
    statuses = []
    shrinking = simulate(workload, traces, "timely", config, 0, tokenizer, on_status=statuses.append)
    features = config.features.model_copy(update={"shrink": False})
    plain = simulate(workload, traces, "timely", config.model_copy(update={"features": features}), 0, tokenizer)
    urgent = {r.request.task_id: r for r in shrinking.records}["job30"], \
        {r.request.task_id: r for r in plain.records}["job30"]
    suspended = [s for s in statuses if s.state == TaskState.SUSPENDED]
    assert suspended and all("more important" in s.message for s in suspended)
    assert urgent[0].segments[0].dispatched_s < urgent[1].segments[0].dispatched_s
    assert urgent[0].utility > urgent[1].utility


def test_rtlm_keeps_a_plan_that_outruns_its_prediction_unfinished(config, tokenizer):
    """rtlm's consolidation reads what is left of each running plan: a plan that runs past its
    predicted size is re-predicted (as long as plans that got this far get), not taken to be
    all but done."""
    long_plan = "mf(50);tc(90);" * 12  # for a one-call instruction: far beyond its prediction
    seen = []

    def check(planner):
        for gen in planner._gens.values():
            if gen.in_engine and gen.tokens:
                seen.append((gen.tokens, gen.plan_tokens))

    planner, _ = run_planner(config, tokenizer, [request("long", plan=long_plan)], policy="rtlm", each_step=check)
    assert planner.records["long"].state == TaskState.SUCCEEDED
    first_size = seen[0][1]
    assert seen[-1][0] > 2 * first_size  # the plan did outrun its prediction
    assert all(size > tokens for tokens, size in seen)


def test_rtlm_offloads_plans_predicted_huge_behind_the_others(config, tokenizer, traces):
    """One generation at a time and a backlog of a short and a long kind of drone task: once
    everything has arrived, every plan the predictor calls huge (above the training median
    here) starts after every other one."""
    from llm_planner.catalog.skills import load_skill_set
    from llm_planner.planning.segment_lengths import make_segment_lengths

    rtlm = with_batch(config, 1).model_copy(
        update={"rtlm": config.rtlm.model_copy(update={"offload_quantile": 0.5})})
    workload = backlog_workload(trace_ids=(3, 4))  # "climb, fly forward, come back"; "if you see an apple, ..."
    result = simulate(workload, traces, "rtlm", rtlm, 0, tokenizer)
    assert {r.state for r in result.records} == {TaskState.SUCCEEDED}
    lengths = make_segment_lengths(rtlm, required=True)
    huge = {}
    for r in result.records:
        skill_set = load_skill_set(config.robot_types[r.request.robot_type].skill_set)
        lengths.start(r.request.task_id, skill_set, r.request.instruction)
        huge[r.request.task_id] = lengths.is_huge(r.request.task_id, 0.5)
    last_arrival = max(job.arrival_s for job in workload.jobs)
    started = {r.request.task_id: r.gen_intervals[0][0] for r in result.records}
    later = [t for t, s in started.items() if s > last_arrival]
    assert any(huge[t] for t in later) and not all(huge[t] for t in later)
    assert max(started[t] for t in later if not huge[t]) < min(started[t] for t in later if huge[t])


def test_the_robot_queue_orders_by_plan_then_by_task_arrival():
    """The rule the robot server and the simulated robots share: within a task the lowest
    index first, whatever the arrival order; the current plan first; other tasks by when their
    next segment came; none while the current task's hold runs."""
    from llm_planner.dispatch.robot_queue import RobotQueue

    queue = RobotQueue(hold_s=5.0)
    queue.add("a", 0, "a0")
    queue.add("a", 2, "a2")
    queue.add("b", 0, "b0")
    queue.add("a", 1, "a1")
    assert queue.pick(0.0) == "a0"
    queue.finished(1.0, plan_ended=False)
    assert queue.pick(1.0) == "a1"  # a's plan goes on in index order, though a2 came first
    queue.finished(1.5, plan_ended=False)
    assert queue.pick(1.5) == "a2"
    queue.finished(2.0, plan_ended=False)  # a is not done, and b waits
    assert queue.pick(6.9) is None and queue.hold_ends_s() == 7.0
    assert queue.pick(7.0) == "b0"
    queue.add("c", 0, "c0")
    queue.finished(8.0, plan_ended=True)
    assert queue.pick(8.0) == "c0" and not queue


def test_a_canceled_plan_stops_holding_the_robot():
    from llm_planner.dispatch.robot_queue import RobotQueue

    queue = RobotQueue(hold_s=5.0)
    queue.add("a", 0, "a0")
    queue.add("a", 1, "a1")
    queue.add("b", 0, "b0")
    assert queue.pick(0.0) == "a0"
    queue.finished(1.0, plan_ended=False)
    queue.remove_task("a")
    assert queue.pick(1.0) is None  # still a's robot until told
    queue.drop_current("a")
    assert queue.pick(1.0) == "b0"


def test_a_scan_whose_time_spreads_widely_waits_for_the_next_segment(config, tokenizer):
    """A lost first unit, a scan of 6.9 s on average (1.5 to 12 s by the exec model) and the
    next segment predicted 5.5 s away (0.55 s a token): at the mean the robot would not wait,
    but often it finishes first, so the scan goes to the robot with the calls after it."""
    from llm_planner.engine import SimEngine

    def slow_engine(profile, tokenizer, clock):
        return SimEngine(profile.model_copy(update={"decode_base_s": 0.55}), tokenizer, clock)

    task = TaskRequest("t", "drone1", "tello", "Scene: [bottle]. Scan for the bottle, then wait.", "normal",
                       Tuf(1, 1, 1.5), -5.0, "s('bottle');d(0.1);")
    planner, _ = run_planner(config, tokenizer, [task], engine_class=slow_engine)
    record = planner.records["t"]
    assert record.state == TaskState.SUCCEEDED
    assert [c.text for c in record.segments[0].calls] == ["s('bottle')", "d(0.1)"]


def test_the_hold_prices_segments_to_come_at_the_batch_the_queue_fills(config, tokenizer):
    """Generations kept in the queue (by latency-guided admission, by the batch shrinking for
    an urgent one) join the batch soon: in a crowded engine a plan's next segments decode at
    the step time of the batch they fill, up to the batch size, not at the running batch's."""
    config = config.model_copy(update={"batch": config.batch.model_copy(update={"max_batch_size": 4})})
    planner, _ = run_planner(config, tokenizer, [])  # idle: what is submitted below stays queued
    engine = planner.replicas[0].engine
    assert planner._loaded_step_s(engine) == engine.predict_step_s(1, 0)
    for i in range(2):
        planner.submit(request(f"t{i}"))
    assert planner._loaded_step_s(engine) == engine.predict_step_s(2, 0)
    for i in range(2, 8):
        planner.submit(request(f"t{i}"))
    assert planner._loaded_step_s(engine) == engine.predict_step_s(4, 0) > engine.predict_step_s(2, 0)


@pytest.mark.parametrize("level,tuf", [("normal", Tuf(1, 1, 1.5)), ("urgent", Tuf(2, 0.2, 0.5))])
def test_a_plans_lost_first_segment_waits_for_the_ones_after_it_at_every_level(config, tokenizer, level, tuf):
    """A slow engine (0.2 s a token), quick calls (0.1 s) and a task whose first unit is lost
    whenever it goes: streaming would leave the robot waiting before every later call, so
    `timely` holds the first segment back, an alert's as a normal plan's."""
    from llm_planner.engine import SimEngine

    def slow_engine(profile, tokenizer, clock):
        return SimEngine(profile.model_copy(update={"decode_base_s": 0.2}), tokenizer, clock)

    task = TaskRequest("t", "drone1", "tello", "Scene: [door]. Wait a little, four times.", level, tuf, -5.0,
                       "d(0.1);" * 4)
    planner, _ = run_planner(config, tokenizer, [task], engine_class=slow_engine)
    record = planner.records["t"]
    assert record.state == TaskState.SUCCEEDED
    assert len(record.segments[0].calls) > 1  # held: the first dispatch carries later segments too


def test_the_hold_sees_as_many_segments_to_come_as_the_skill_sets_finished_plans_had(config, tokenizer):
    """Without a predictor the segment lengths give only the next segment. Priced one segment
    ahead, the hold releases a plan's held units as soon as they cover the next segment's
    generation, and where the engine writes slower than the robot acts the robot then waits
    before every unit after it; so the hold prices as many segments as the skill set's
    finished plans had left, and before any finished, as many as the plan has so far."""
    plan = "mf(50);tc(90);mf(50);tc(90);tp();"  # five segments with a call
    planner, _ = run_planner(config, tokenizer, [])
    planner.submit(request("first", plan=plan))
    first = planner._gens["first"]
    assert planner._segments_to_come(first) == [first.skill_set.segment_tokens]
    first.call_segments = 3
    assert planner._segments_to_come(first) == [first.skill_set.segment_tokens] * 3
    planner, _ = run_planner(config, tokenizer, [request("done", plan=plan)])
    assert planner.records["done"].state == TaskState.SUCCEEDED
    planner.submit(request("next", plan=plan))
    gen = planner._gens["next"]
    assert planner._segments_to_come(gen) == [gen.skill_set.segment_tokens] * 5
    gen.call_segments = 2
    assert planner._segments_to_come(gen) == [gen.skill_set.segment_tokens] * 3
    gen.call_segments = 7  # longer than the plans seen: one more at least
    assert planner._segments_to_come(gen) == [gen.skill_set.segment_tokens]
