"""Run metrics: per-task comparison of a live and a simulated run, plan throughput, and the
seed-by-seed gap between two policies (over every task, and over the tasks with the same plan)."""

import math

from llm_planner.domain.tasks import TaskRecord, TaskRequest, TaskState
from llm_planner.domain.tuf import Tuf
from llm_planner.lrtrace.compare import paired_gaps, same_plan_gaps
from llm_planner.lrtrace.metrics import (
    by_level,
    paired_differences,
    robot_busy_at_arrival,
    summarize,
    task_differences,
)
from llm_planner.lrtrace.report import paired_lines


def record(task_id, robot, arrival, finished, response, level="normal"):
    r = TaskRecord(TaskRequest(task_id, robot, "tello", "fly", level, Tuf(1, 1, 1.5), arrival))
    r.finished_s, r.response_time_s = finished, response
    return r


def test_the_robot_busy_at_a_tasks_arrival_is_what_its_earlier_tasks_had_left():
    records = [record("a", "r1", 0.0, 10.0, 0.2), record("b", "r1", 4.0, 12.0, 6.1),
               record("c", "r2", 5.0, 7.0, 0.3), record("d", "r1", 13.0, 15.0, 0.2)]
    assert robot_busy_at_arrival(records) == {"a": 0.0, "b": 6.0, "c": 0.0, "d": 0.0}


def test_task_differences_put_the_largest_live_lag_first_with_both_runs_robot_wait():
    live = [record("a", "r1", 0.0, 10.0, 0.2), record("b", "r1", 4.0, 12.0, 6.1), record("c", "r2", 5.0, 7.0, 0.3)]
    sim = [record("a", "r1", 0.0, 3.0, 0.2), record("b", "r1", 4.0, 6.0, 0.2), record("c", "r2", 5.0, 7.0, 0.4)]
    rows = task_differences(live, sim)
    assert [r["task"] for r in rows] == ["b", "a", "c"]
    assert rows[0]["difference_s"] == 6.1 - 0.2
    assert (rows[0]["robot_busy_live_s"], rows[0]["robot_busy_sim_s"]) == (6.0, 0.0)
    assert math.isnan(rows[0]["first_sent_sim_s"])  # records without segments
    rows = task_differences(live, sim, live_first_sent_s={"b": 5.9})
    assert rows[0]["first_sent_live_s"] == 5.9


def test_plans_per_minute_count_generated_plans_from_the_first_arrival_to_the_last_plan_done():
    records = [record("a", "r1", 0.0, 10.0, 0.2), record("b", "r2", 6.0, 12.0, 0.3), record("c", "r3", 9.0, 14.0, 0.3)]
    records[0].plan_done_s, records[1].plan_done_s = 4.0, 30.0  # c's plan was never generated
    assert summarize(records)["plans_per_min"] == 4.0  # 2 plans in 30 s
    for r in records:
        r.plan_done_s = math.nan
    assert summarize(records)["plans_per_min"] is None


def test_plans_per_minute_over_seeds_add_each_runs_span_instead_of_overlapping_their_clocks():
    runs = []
    for _ in range(2):  # two seeds of the same 30 s run, each on its own clock from 0
        a, b = record("a", "r1", 0.0, 10.0, 0.2), record("b", "r2", 6.0, 12.0, 0.3, level="urgent")
        a.plan_done_s, b.plan_done_s = 4.0, 30.0
        runs.append([a, b])
    levels = by_level([r for run in runs for r in run], runs=runs)
    assert levels["all"]["plans_per_min"] == 4.0  # 4 plans in 2 x 30 s, not in 30 s
    assert levels["urgent"]["plans_per_min"] == 60.0 * 2 / (2 * 24.0)
    assert levels["normal"]["plans_per_min"] == 60.0 * 2 / (2 * 4.0)


def executed(task_id, level, utility, robot="r1"):
    """A task that ran one unit (beta 1) and earned `utility` of it."""
    r = record(task_id, robot, 0.0, 5.0, 0.5, level=level)
    r.state, r.units_executed, r.utility = TaskState.SUCCEEDED, 1, utility
    return r


def test_paired_differences_compare_two_policies_seed_by_seed():
    # seed 0: the reference earns 0.9 / 0.5 (normal / urgent), the other 0.8 / 0.5;
    # seed 1: 0.6 / 1.0 against 0.7 / 0.4
    reference = [[executed("n", "normal", 0.9), executed("u", "urgent", 0.5)],
                 [executed("n", "normal", 0.6), executed("u", "urgent", 1.0)]]
    other = [[executed("n", "normal", 0.8), executed("u", "urgent", 0.5)],
             [executed("n", "normal", 0.7), executed("u", "urgent", 0.4)]]
    reference, other = [by_level(run) for run in reference], [by_level(run) for run in other]
    gaps = paired_differences(other, reference)
    # gaps +10 / -10 and 0 / +60: standard deviations 14.1 and 42.4, over sqrt(2) seeds
    assert gaps["normal"] == {"mean": 0.0, "sem": 10.0, "min": -10.0, "max": 10.0, "seeds": 2}
    assert gaps["urgent"] == {"mean": 30.0, "sem": 30.0, "min": 0.0, "max": 60.0, "seeds": 2}
    assert gaps["all"]["mean"] == 15.0
    assert paired_differences(reference, reference)["normal"] == {"mean": 0.0, "sem": 0.0, "min": 0.0, "max": 0.0,
                                                                  "seeds": 2}
    assert paired_differences(other[:1], reference[:1])["normal"]["sem"] is None


def test_the_gap_over_the_same_plans_leaves_out_a_task_whose_plan_differed():
    def planned(task_id, level, utility, plan):  # each task on its own robot
        r = executed(task_id, level, utility, robot=f"robot-{task_id}")
        r.plan = plan
        return r

    # seed 0: the other run wrote task m's plan differently (and earned all of it);
    # seed 1: every plan matched
    reference = [[planned("n", "normal", 0.9, "a"), planned("m", "normal", 0.5, "b"), planned("u", "urgent", 1.0, "c")],
                 [planned("n", "normal", 0.8, "a"), planned("m", "normal", 0.6, "b"), planned("u", "urgent", 1.0, "c")]]
    other = [[planned("n", "normal", 0.7, "a"), planned("m", "normal", 1.0, "b2"), planned("u", "urgent", 1.0, "c")],
             [planned("n", "normal", 0.4, "a"), planned("m", "normal", 0.6, "b"), planned("u", "urgent", 1.0, "c")]]
    same = same_plan_gaps(other, reference)
    assert (same["tasks"], same["of"]) == (5, 6)
    # normal: seed 0 over n alone 90 - 70, seed 1 over n and m (140 - 100) / 2
    assert same["normal"]["min"] == same["normal"]["max"] == 20.0
    assert same["urgent"]["mean"] == 0.0
    # over every task the differing plan turns seed 0's normal gap around: (140 - 170) / 2
    gaps = paired_gaps({"timely": reference, "other": other})["other"]
    assert gaps["normal"]["min"] == -15.0
    header, every_task, same_only, why = paired_lines({"timely": {}, "other": {"paired": gaps}})
    assert "mean of 2 seeds" in header and every_task.split()[0] == "other"
    assert same_only.strip().startswith("same plans only (5 of 6 tasks) normal +20.0")
    assert "--dtype float32" in why
    every_plan_the_same = {k: v for k, v in gaps.items() if k != "same_plans"}
    assert len(paired_lines({"timely": {}, "other": {"paired": every_plan_the_same}})) == 2
    assert same_plan_gaps(reference, reference) is None


def test_a_same_plan_gap_leaves_out_tasks_whose_robot_ran_another_plan_before(config, tokenizer):
    """job0 executes a plan three times as long in one run. job1, on the same robot, arrives
    when the robot would be free in the reference run but is still busy in the other: its own
    plan is the same, its first unit is late all the same. The same-plan gap leaves it out, as
    it leaves out job0, and pairs job2 (another robot) alone."""
    from llm_planner.lrtrace.compare import same_plan_gaps
    from llm_planner.lrtrace.composer import load_preset, preset_traces
    from llm_planner.lrtrace.formats import Job, Workload
    from llm_planner.lrtrace.simulate import simulate

    traces = preset_traces(load_preset("wid1"))
    plan = traces.by_id()[1].plan
    workload = Workload(name="robot-history", duration_s=10, agents=2, jobs=[
        Job(job_id=0, arrival_s=0.0, agent=0, trace_id=1), Job(job_id=1, arrival_s=5.0, agent=0, trace_id=1),
        Job(job_id=2, arrival_s=0.5, agent=1, trace_id=1)])
    reference = simulate(workload, traces, "timely", config, 0, tokenizer).records
    longer = simulate(workload, traces, "timely", config, 0, tokenizer, plans={"job0": plan * 3}).records
    job1 = {r.request.task_id: r for r in reference}["job1"], {r.request.task_id: r for r in longer}["job1"]
    assert job1[0].plan == job1[1].plan and job1[0].utility > job1[1].utility  # the robot was busy
    gaps = same_plan_gaps([longer], [reference])
    assert (gaps["tasks"], gaps["of"]) == (1, 3)
    assert gaps["normal"]["mean"] == 0.0
