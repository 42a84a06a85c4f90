"""The decision trace: what it records in a whole simulated run, and `lrtrace explain` on it."""

import json

import pytest

from llm_planner.commands.lrtrace import main as lrtrace_main
from llm_planner.domain.decisions import (
    Decision,
    DecisionTrace,
    Kind,
    Reason,
    TracedRun,
    read_decisions,
    write_decisions,
)
from llm_planner.lrtrace.composer import compose_preset, load_preset, mean_exec_times, preset_traces
from llm_planner.lrtrace.explain import describe_late, late_tasks, timeline
from llm_planner.lrtrace.simulate import simulate


@pytest.fixture(scope="module")
def wid2(config):
    traces = preset_traces(load_preset("wid2"))
    return compose_preset(load_preset("wid2"), 0, traces, mean_exec_times(traces, config.robot_types)), traces


@pytest.fixture(scope="module")
def traced_runs(config, tokenizer, wid2):
    workload, traces = wid2
    return {policy: (simulate(workload, traces, policy, config, 0, tokenizer),
                     simulate(workload, traces, policy, config, 0, tokenizer, trace_decisions=True))
            for policy in ("timely", "timelyllm-paper", "vllm")}


def outcome(result):
    return [(r.request.task_id, r.state, r.utility, r.response_time_s, r.plan, r.gen_intervals) for r in result.records]


@pytest.mark.parametrize("policy", ["timely", "timelyllm-paper", "vllm"])
def test_tracing_changes_no_decision(traced_runs, policy):
    plain, traced = traced_runs[policy]
    assert plain.trace is None and traced.trace.decisions
    assert outcome(plain) == outcome(traced)


@pytest.mark.parametrize("policy", ["timely", "timelyllm-paper", "vllm"])
def test_every_task_ends_in_the_trace_as_in_its_record(traced_runs, policy):
    _, traced = traced_runs[policy]
    ended = {d.task_id: d for d in traced.trace.decisions if d.kind is Kind.ENDED}
    assert {r.request.task_id: r.state.name.lower() for r in traced.records} == \
        {task: d.reason.value for task, d in ended.items()}
    for r in traced.records:
        assert ended[r.request.task_id].figures["utility"] == pytest.approx(r.utility, abs=1e-3)
    queued = {d.task_id for d in traced.trace.decisions if d.kind is Kind.QUEUED and d.reason is Reason.ARRIVAL}
    assert queued == set(ended)


def test_the_paper_pauses_after_each_segment_and_timely_shrinks_the_batch_for_urgent_ones(traced_runs):
    kinds = {policy: {(d.kind, d.reason) for d in traced.trace.decisions}
             for policy, (_, traced) in traced_runs.items()}
    assert (Kind.SUSPENDED, Reason.PAUSED) in kinds["timelyllm-paper"]
    assert (Kind.SUSPENDED, Reason.PAUSED) not in kinds["timely"]
    assert (Kind.SUSPENDED, Reason.SHRUNK) in kinds["timely"] and (Kind.HELD, Reason.HOLD_RULE) in kinds["timely"]
    assert kinds["vllm"] >= {(Kind.STREAMED, Reason.PLAN_DONE)}
    assert not any(kind in (Kind.SUSPENDED, Kind.HELD) for kind, _ in kinds["vllm"])


@pytest.mark.parametrize("policy", ["timely", "timelyllm-paper", "vllm"])
def test_the_late_tasks_are_the_ones_whose_records_lost_utility(traced_runs, policy):
    _, traced = traced_runs[policy]
    lost = {r.request.task_id: r.max_utility - r.utility for r in traced.records if r.utility < r.max_utility - 1e-9}
    late = late_tasks(traced.trace.decisions)
    assert {t.task_id: pytest.approx(t.lost, abs=1e-3) for t in late} == lost
    assert [t.lost for t in late] == sorted((t.lost for t in late), reverse=True)


def test_a_wait_lasts_until_the_decision_that_ends_it():
    trace = DecisionTrace()
    trace.record(0.0, "a", Kind.QUEUED, Reason.ARRIVAL)
    for t in (0.1, 0.2, 0.3):  # the same deferral, iteration after iteration, is kept once
        trace.record(t, "a", Kind.DEFERRED, Reason.LATENCY_GUIDED)
    trace.record(0.35, "a", Kind.DEFERRED, Reason.BATCH_FULL)
    trace.record(0.5, "a", Kind.ADMITTED, Reason.FITS)
    trace.record(0.6, "a", Kind.DEFERRED, Reason.LATENCY_GUIDED)  # a new wait after an admission
    assert [(s.decision.reason, round(s.lasted_s, 3)) for s in timeline(trace.decisions, "a")] == [
        (Reason.ARRIVAL, 0.0), (Reason.LATENCY_GUIDED, 0.25), (Reason.BATCH_FULL, 0.15), (Reason.FITS, 0.0),
        (Reason.LATENCY_GUIDED, 0.0)]
    trace.record(0.9, "a", Kind.LOST_UTILITY, Reason.LATE_RESPONSE, earned=0.5, most=1.0)
    [late] = late_tasks(trace.decisions)
    assert late.lost == 0.5 and late.costliest.decision.reason is Reason.LATENCY_GUIDED
    # held again at the next segment boundary: the same wait goes on, its time counted once
    for t in (1.0, 1.1):
        trace.record(t, "a", Kind.HELD, Reason.HOLD_RULE, hold_for=2)
    trace.record(1.3, "a", Kind.STREAMED, Reason.HOLD_RULE)
    held = [s for s in timeline(trace.decisions, "a") if s.decision.kind is Kind.HELD]
    assert [(round(s.lasted_s, 3), s.continues) for s in held] == [(0.3, False), (0.0, True)]


def test_decision_files_round_trip_and_a_bad_line_is_named(tmp_path):
    runs = [("timely seed 0", [Decision(0.5, "t1", Kind.ADMITTED, Reason.FITS, {"batch": 3, "at_risk": ""})]),
            ("vllm seed 0", [Decision(0.7, "t1", Kind.ENDED, Reason.SUCCEEDED, {"message": "done"})])]
    path = tmp_path / "d.jsonl"
    write_decisions([(run, TracedRun(decisions)) for run, decisions in runs], path)
    assert {run: traced.decisions for run, traced in read_decisions(path).items()} == \
        {run: decisions for run, decisions in runs}
    path.write_text(path.read_text() + json.dumps({"run": "x", "t_s": 1, "task_id": "t", "kind": "flew"}) + "\n")
    with pytest.raises(ValueError, match=r"d.jsonl:3: neither a decision nor an iteration"):
        read_decisions(path)


def test_lrtrace_explain_prints_a_tasks_reasons_and_the_late_tasks(tmp_path, capsys):
    decisions = tmp_path / "decisions.jsonl"
    assert lrtrace_main(["compare", "wid2", "--policies", "timelyllm-paper,timely", "--duration", "60",
                         "--decisions", str(decisions), "--no-plots", "--quiet"]) == 0
    runs = read_decisions(decisions)
    assert list(runs) == ["timelyllm-paper seed 0", "timely seed 0"]
    paused = next(d.task_id for d in runs["timelyllm-paper seed 0"].decisions if d.reason is Reason.PAUSED)
    capsys.readouterr()
    assert lrtrace_main(["explain", str(decisions), "--task", paused]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("run timelyllm-paper seed 0")
    assert any(" suspended " in line and " paused " in line for line in lines)
    assert "ended" in lines[-1] and "succeeded" in lines[-1]
    assert lrtrace_main(["explain", str(decisions), "--late", "--run", "timelyllm-paper seed 0", "--top", "3"]) == 0
    out = capsys.readouterr().out
    assert "task(s) lost utility" in out and ": lost " in out
    assert lrtrace_main(["explain", str(decisions), "--late", "--run", "fcfs seed 0"]) == 2
    assert lrtrace_main(["explain", str(decisions), "--task", "no-such-task"]) == 2


def test_the_trace_holds_every_engine_iteration_with_its_batch(traced_runs):
    _, traced = traced_runs["timely"]
    iterations = traced.trace.iterations
    assert len(iterations) == traced.engine_stats.steps
    assert sum(i.prefill_tokens for i in iterations) == sum(traced.engine_stats.prefill_tokens.values())
    assert max(len(i.members) for i in iterations) == traced.engine_stats.max_batch
    joined = sum(1 for d in traced.trace.decisions if d.kind in (Kind.ADMITTED, Kind.RESUMED))
    assert sum(i.started for i in iterations) == joined
    assert all(i.duration_s > 0 and i.predicted_s > 0 for i in iterations)
    assert [i.t_s for i in iterations] == sorted(i.t_s for i in iterations)


def test_a_late_task_whose_robot_was_busy_says_so_before_a_shorter_wait():
    trace = DecisionTrace()
    trace.record(10.0, "b", Kind.QUEUED, Reason.ARRIVAL, ref_s=10.0)
    trace.record(10.0, "b", Kind.DEFERRED, Reason.KEPT_OUT, favoured="u")
    trace.record(10.06, "b", Kind.ADMITTED, Reason.FITS, batch=2)
    trace.record(10.3, "b", Kind.STREAMED, Reason.HOLD_RULE)
    trace.record(14.0, "b", Kind.LOST_UTILITY, Reason.LATE_RESPONSE, earned=0.0, most=1.0, response_s=2.3)
    [late] = late_tasks(trace.decisions)
    assert late.robot_busy_s == pytest.approx(2.0) and late.costliest.lasted_s == pytest.approx(0.06)
    assert describe_late(late) == ("b: lost 1.000; its robot started the first unit 2.000 s after it was sent "
                                   "(busy with earlier work); costliest: deferred (kept_out) at 10.000 s for 0.060 s")
