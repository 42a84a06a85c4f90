"""End-to-end simulations through the real planner core (scheduler, batch controller,
segmenter, sim engine, simulated robots) on a virtual clock."""

import math

import pytest
from driven import backlog_workload

from llm_planner.catalog.tokenizer import count_tokens
from llm_planner.domain.tasks import TaskState
from llm_planner.engine.sim import TEMPLATE_TOKENS
from llm_planner.lrtrace.composer import compose_preset, load_preset, mean_exec_times, preset_traces
from llm_planner.lrtrace.metrics import by_level
from llm_planner.lrtrace.simulate import simulate
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
