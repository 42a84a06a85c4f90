"""A simulated robot's queue of dispatched segments: one plan at a time, in plan and task
order, and free again when a plan ends or goes quiet."""

from collections import defaultdict

from llm_planner.lrtrace.simulate import EventQueue


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
