"""Robots that fail calls: the planner's error follow-ups (planning/replan.py) and failures drawn
on purpose (catalog/faults.py), through the real planner core on a virtual clock."""

import threading

import pytest
from driven import run_planner

from llm_planner.catalog.exec_model import load_exec_model
from llm_planner.catalog.faults import CallFaults, parse_fail_rates
from llm_planner.catalog.skills import load_skill_set
from llm_planner.dispatch.robot_port import CallTimeSource
from llm_planner.domain.tasks import DispatchedSegment, TaskRequest, TaskState
from llm_planner.domain.tuf import Tuf
from llm_planner.robots.backends import SimBackend

PLAN = "mu(50);mf(50);tp();"
TUF = Tuf(1, 1, 1.5)


def task(task_id="a", plan=PLAN, tuf=TUF):
    return TaskRequest(task_id, "drone1", "tello", "Scene: [door, chair]. Fly forward 50 cm and take a photo.",
                       "normal", tuf, 0.0, plan)


class FailsOnce(CallTimeSource):
    """The robot fails the first `call` of task `task_id` only."""

    def __init__(self, task_id, call):
        super().__init__(0)
        self.task_id, self.call = task_id, call

    def failed_call(self, task_id, segment):
        if task_id != self.task_id:
            return None
        return next((i for i, c in enumerate(segment.calls) if c.text == self.call), None)


def with_replan(config, **fields):
    return config.model_copy(update={"replan": config.replan.model_copy(update=fields)})


def finals(statuses):
    return {s.task_id: s for s in statuses if s.state.terminal}


def test_a_failed_call_gets_a_follow_up_that_is_planned_dispatched_and_succeeds(config, tokenizer):
    planner, statuses = run_planner(config, tokenizer, [task()], times=FailsOnce("a", "mf(50)"))
    end = finals(statuses)
    assert sorted(end) == ["a", "a-replan1"]
    assert end["a"].state == TaskState.FAILED
    failed = next(s for s in planner.records["a"].segments if "mf(50)" in s.call_texts)
    assert end["a"].message == (f"robot drone1 failed segment {failed.index} at mf(50): simulated failure of "
                                "mf(50); replanned as task a-replan1")
    assert planner.records["a"].followed_by == "a-replan1"
    follow = planner.records["a-replan1"]
    assert follow.state == TaskState.SUCCEEDED and end["a-replan1"].state == TaskState.SUCCEEDED
    request = follow.request
    assert request.robot_id == "drone1" and request.urgency_name == config.replan_level.name == "urgent"
    assert request.instruction == ("Scene: [door, chair], Task: [E] mf(50) failed: simulated failure of mf(50). "
                                   "Done so far: mu(50). Original request: Fly forward 50 cm and take a photo.")
    assert request.follow_up.of_task == "a" and request.follow_up.attempt == 1
    assert request.arrival_s == request.follow_up.failed_s == failed.finished_s
    # the sim engine replays the failed plan from the failed call on; the robot ran it
    assert follow.plan == "mf(50);tp();"
    assert [c for s in follow.segments for c in s.call_texts] == ["mf(50)", "tp()"]
    assert planner.active_tasks == 0
    # the follow-up is reported by recovery, not counted again as a task of its type
    from llm_planner.lrtrace.metrics import by_label, by_level

    records = list(planner.records.values())
    assert sum(m["tasks"] for m in by_label(records).values()) == by_level(records)["all"]["tasks"] == 1


def test_attempts_exhausted_fail_the_task_with_the_reason_and_lose_nothing(config, tokenizer):
    planner, statuses = run_planner(with_replan(config, max_attempts=2), tokenizer, [task(), task("b", "tp();")],
                                    times=CallTimeSource(0, {"mf": 1.0}))
    end = finals(statuses)
    assert sorted(end) == ["a", "a-replan1", "a-replan2", "b"]
    assert end["b"].state == TaskState.SUCCEEDED
    assert end["a-replan1"].message.endswith("replanned as task a-replan2")
    assert planner.records["a-replan2"].request.follow_up.of_task == "a-replan1"
    assert planner.records["a-replan2"].request.follow_up.root_task == "a"
    # the chain's follow-ups all carry the original request, not the follow-up before
    assert planner.records["a-replan2"].request.instruction.endswith(
        "Original request: Fly forward 50 cm and take a photo.")
    assert end["a-replan2"].state == TaskState.FAILED
    assert end["a-replan2"].message == ("robot drone1 failed segment 0 at mf(50): simulated failure of mf(50); "
                                        "not replanned: 2 of 2 follow-ups made (replan.max_attempts)")
    assert all(r.state.terminal for r in planner.records.values()) and planner.active_tasks == 0


def test_no_follow_up_when_replanning_is_off(config, tokenizer):
    _, statuses = run_planner(with_replan(config, max_attempts=0), tokenizer, [task()],
                              times=FailsOnce("a", "mf(50)"))
    end = finals(statuses)
    assert sorted(end) == ["a"] and end["a"].state == TaskState.FAILED
    assert "not replanned: 0 of 0 follow-ups made" in end["a"].message


def test_a_task_whose_utility_is_lost_is_replanned_only_if_configured(config, tokenizer):
    hopeless = Tuf(1, 0.0, 0.001)  # no first action can come within 1 ms
    _, statuses = run_planner(config, tokenizer, [task(tuf=hopeless)], times=FailsOnce("a", "mf(50)"))
    end = finals(statuses)
    assert sorted(end) == ["a"]
    assert end["a"].message.endswith("not replanned: its utility is lost (replan.when_utility_lost)")
    _, statuses = run_planner(with_replan(config, when_utility_lost=True), tokenizer, [task(tuf=hopeless)],
                              times=FailsOnce("a", "mf(50)"))
    assert finals(statuses)["a-replan1"].state == TaskState.SUCCEEDED


def test_a_failure_before_any_call_replans_the_whole_plan(config, tokenizer):
    planner, statuses = run_planner(config, tokenizer, [task()], times=FailsOnce("a", "mu(50)"))
    follow = planner.records["a-replan1"]
    assert "Task: [E] mu(50) failed: simulated failure of mu(50). Done so far: nothing." in follow.request.instruction
    assert follow.plan == PLAN and follow.state == TaskState.SUCCEEDED


def test_fail_rates_parse_and_reject_bad_input():
    assert parse_fail_rates("mf=0.1, g=0.05") == {"mf": 0.1, "g": 0.05}
    assert parse_fail_rates("0.2") == {"*": 0.2} == parse_fail_rates(0.2)
    assert parse_fail_rates({"tp": 1}) == {"tp": 1.0}
    assert parse_fail_rates(None) == {} == parse_fail_rates("")
    with pytest.raises(ValueError, match="probabilities"):
        parse_fail_rates("mf=1.5")
    with pytest.raises(ValueError, match="SKILL=PROBABILITY"):
        parse_fail_rates("mf=often")
    faults = CallFaults(parse_fail_rates("mf=1,*=0"), 0)
    skills = load_skill_set("minispec_drone")
    assert [faults.fails("t", c) for c in skills.find_calls(PLAN)] == [False, True, False]


def test_a_live_simulated_robot_fails_the_calls_a_simulated_run_fails():
    """Same seed, same task: the fleet's sim backend and the simulation's robots draw the same
    failures, call by call in plan order (and the draws leave the call times alone)."""
    skills = load_skill_set("minispec_drone")
    model = load_exec_model("tello")
    calls = skills.find_calls("mu(50);" + "mf(50);tc(90);" * 20 + "tp();")
    rates = "mf=0.3,tc=0.2"
    for seed in (0, 1, 7):
        live = SimBackend(model, seed=seed, time_scale=1e-9, fail_rate=rates)
        sim_robot = CallTimeSource(seed, parse_fail_rates(rates))
        live_failed, sim_failed = [], []
        for task_id in ("job1", "job2"):
            for i, call in enumerate(calls):
                if not live.execute(call, threading.Event(), task_id).success:
                    live_failed.append((task_id, i))
            remaining = list(enumerate(calls))
            while remaining:  # a simulated robot draws a segment's calls up to the first that fails
                segment = DispatchedSegment(0, "", [c for _, c in remaining], [1], True, 0.0)
                failed = sim_robot.failed_call(task_id, segment)
                if failed is None:
                    break
                sim_failed.append((task_id, remaining[failed][0]))
                remaining = remaining[failed + 1:]
        assert live_failed == sim_failed and live_failed, seed
    plain = SimBackend(model, seed=0)
    drawn = SimBackend(model, seed=0, fail_rate=rates)
    assert [plain.draw_s(c, "t") for c in calls] == [drawn.draw_s(c, "t") for c in calls]


def test_a_failure_without_a_call_run_is_not_replanned(config, tokenizer):
    """Failures a robot link reports (a timeout, a lost result, a robot gone) carry no call
    times: the robot did not report a failed call, so nothing is replanned."""

    class NoCallRan(FailsOnce):
        def times(self, task_id, segment, model):
            return [] if task_id == self.task_id else super().times(task_id, segment, model)

    planner, statuses = run_planner(config, tokenizer, [task()], times=NoCallRan("a", "mu(50)"))
    end = finals(statuses)
    assert sorted(end) == ["a"] and end["a"].state == TaskState.FAILED
    assert end["a"].message == "robot drone1 failed segment 0: simulated failure of mu(50)"
    assert not planner.records["a"].robot_failure and not planner.records["a"].followed_by


def test_after_a_failed_call_the_robot_awaits_the_follow_up_before_other_tasks():
    """The follow-up continues the failed plan: a robot with other tasks waiting runs it first,
    if it comes within FOLLOW_UP_HOLD_S; if none comes, the robot moves on."""
    from llm_planner.dispatch.robot_queue import FOLLOW_UP_HOLD_S, RobotQueue

    queue = RobotQueue(hold_s=5.0)
    queue.add("a", 0, "a0")
    queue.add("b", 0, "b0")
    assert queue.pick(0.0) == "a0"
    queue.finished(1.0, plan_ended=True, call_failed=True)
    assert queue.pick(1.1) is None  # b waits: a's follow-up is on its way
    queue.add("a-replan1", 0, "r0")
    assert queue.pick(1.3) == "r0"
    queue.finished(2.0, plan_ended=True, call_failed=True)  # the follow-up fails too
    assert queue.current == "a-replan2" and queue.hold_ends_s() == 2.0 + FOLLOW_UP_HOLD_S
    assert queue.pick(2.0 + FOLLOW_UP_HOLD_S - 0.01) is None
    assert queue.pick(2.0 + FOLLOW_UP_HOLD_S) == "b0"  # no follow-up came (attempts used): b runs


def test_a_follow_up_overtakes_the_robots_other_waiting_tasks(config, tokenizer):
    """Through the planner: b is queued behind a on the same robot; a's call fails, and its
    follow-up runs before b."""
    b = TaskRequest("b", "drone1", "tello", "Scene: [door]. Take a photo.", "normal", Tuf(1, 1, 1.5), 0.0, "tp();")

    def submit_b_once_a_runs(planner):
        started = [seg for seg in planner.records["a"].segments if seg.started_s == seg.started_s]
        if started and "b" not in planner.records:
            planner.submit(b)

    planner, _ = run_planner(config, tokenizer, [task()], times=FailsOnce("a", "mf(50)"),
                             each_step=submit_b_once_a_runs)
    failed = next(seg for seg in planner.records["a"].segments if "mf(50)" in seg.call_texts)
    assert planner.records["b"].segments[0].dispatched_s < failed.finished_s  # b waited on the robot
    follow, other = planner.records["a-replan1"], planner.records["b"]
    assert follow.state == other.state == TaskState.SUCCEEDED
    assert follow.segments[0].started_s < other.segments[0].started_s


@pytest.mark.ros  # ros/replay.py rebuilds them
def test_follow_ups_are_rebuilt_from_a_recordings_final_statuses(config):
    """`lrtrace replay`/`report` know the planner's follow-ups only from the failed tasks'
    final statuses: each is rebuilt as the next link of its task's chain."""
    import math
    from types import SimpleNamespace

    from llm_planner.domain.tasks import FollowUp, TaskRecord
    from llm_planner.ros.replay import _follow_up_records

    failed = "robot drone1 failed segment {} at mf(50): blocked; replanned as task {}"
    root = TaskRecord(task("a"), state=TaskState.FAILED, message=failed.format(1, "a-replan1"))
    final = {"a-replan1": SimpleNamespace(robot_id="drone1", state=int(TaskState.FAILED), utility=math.nan,
                                          message=failed.format(0, "a-replan2"), response_time_s=0.3),
             "a-replan2": SimpleNamespace(robot_id="drone1", state=int(TaskState.SUCCEEDED), utility=2.0,
                                          message="all segments executed", response_time_s=0.2)}
    ended = {"a": 1.0, "a-replan1": 2.0, "a-replan2": 3.0}
    first, second = _follow_up_records([root], final, {"a": 0.0}, ended, config)
    instruction = task("a").instruction
    assert first.request.follow_up == FollowUp("a", "a", 1, 1.0, instruction)
    assert second.request.follow_up == FollowUp("a-replan1", "a", 2, 2.0, instruction)
    assert root.followed_by == "a-replan1" and first.followed_by == "a-replan2"
    assert root.robot_failure == root.message and first.robot_failure and not second.robot_failure
    assert (first.utility, second.utility, second.state) == (0.0, 2.0, TaskState.SUCCEEDED)
    assert second.request.urgency_name == config.replan_level.name and second.finished_s == 3.0
