"""The planner's control surface over real ROS 2: tasks as PlanTask goals with feedback and
cancel, changing a task's urgency, canceling and listing tasks, through `llm-planner-ctl`."""

import time

import pytest
from ros_fixtures import instruction, start_fleet, wait_until

from llm_planner.domain.tasks import TaskState
from llm_planner.ros.control import CANCELED_BY_CLIENT, CANCELED_BY_OPERATOR
from llm_planner.ros.ctl import Ctl
from llm_planner.ros.ctl import main as ctl
from llm_planner.settings.fleet import RobotConfig, RobotSafety

pytestmark = pytest.mark.ros

FAST = {"time_scale": 0.05}
SLOW = {"time_scale": 1.0}  # calls take seconds: a task is still running when it is canceled


@pytest.fixture(scope="module")
def fleet():
    robots = [RobotConfig(id=f"drone{n}", type="tello", options=dict(FAST, seed=n)) for n in range(6)]
    robots.append(RobotConfig(id="slow", type="tello", options=SLOW))
    robots.append(RobotConfig(id="gated", type="tello", options=FAST,
                              safety=RobotSafety(forbid=["move_up"], approve=["tp"], approval_timeout_s=30)))
    running = start_fleet(robots, batch={"max_batch_size": 1})
    yield running
    running.stop()


def test_a_task_as_an_action_reports_each_status_and_its_end(fleet, capsys):
    assert ctl(["submit", "drone0", instruction(3), "--task-id", "act-ok"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("act-ok QUEUED")
    executing = [line for line in lines if " EXECUTING " in line]
    assert executing and "segment 0: mu(80);" in executing[0]
    assert lines[-1].startswith("act-ok SUCCEEDED  all segments executed  utility")
    # the status topic sees it too, on its own channel: it may come after the action's result
    assert fleet.client.wait_terminal({"act-ok"}, timeout=10)
    assert fleet.client.terminal("act-ok").state == TaskState.SUCCEEDED


def test_a_goal_for_an_unknown_robot_or_with_bad_fields_is_rejected_with_the_reason(fleet, capsys):
    assert ctl(["submit", "submarine", instruction(3), "--task-id", "act-bad-robot"]) == 1
    assert ctl(["submit", "drone0", instruction(3), "--task-id", "act-bad-tuf", "--tuf", "1", "2", "1"]) == 1
    assert "rejected" in capsys.readouterr().err
    assert fleet.client.wait_terminal({"act-bad-robot", "act-bad-tuf"}, timeout=10)
    assert "unknown robot_id 'submarine'" in fleet.client.terminal("act-bad-robot").message
    assert "cutoff_s" in fleet.client.terminal("act-bad-tuf").message
    assert ctl(["submit", "drone0", instruction(3), "--urgency", "frantic"]) == 2


def test_canceling_the_goal_cancels_the_task_its_robot_call_and_its_engine_place(fleet):
    from rclpy.action import ActionClient

    from llm_planner.domain.names import PLAN_TASK_ACTION
    from llm_planner_interfaces.action import PlanTask
    from llm_planner_interfaces.msg import Task

    client = Ctl()
    try:
        action = ActionClient(client.node, PlanTask, PLAN_TASK_ACTION)
        assert action.wait_for_server(timeout_sec=10)
        feedback = []
        goal = PlanTask.Goal(task=Task(task_id="act-cancel", robot_id="slow", instruction=instruction(3)))
        handle = client.wait(action.send_goal_async(goal, feedback_callback=lambda f: feedback.append(
            f.feedback.status)), 10)
        assert handle.accepted
        deadline = time.monotonic() + 30
        while not any(s.state == TaskState.EXECUTING for s in feedback) and time.monotonic() < deadline:
            client.executor.spin_once(timeout_sec=0.05)
        assert any(s.state == TaskState.EXECUTING for s in feedback)
        robot = fleet.fleet.robot("slow")
        assert wait_until(lambda: robot.running == ("act-cancel", 0), 10)  # in the middle of its first call
        client.wait(handle.cancel_goal_async(), 10)
        result = client.wait(handle.get_result_async(), 30)
    finally:
        client.close()
    status = result.result.status
    assert status.state == TaskState.CANCELED and status.message == CANCELED_BY_CLIENT
    assert result.status == 5  # GoalStatus CANCELED
    assert wait_until(lambda: robot.running is None, 2)  # its call was canceled: mu(80) takes longer
    planner = fleet.fleet.planner_node.planner
    assert wait_until(lambda: "act-cancel" not in planner.engine.running and planner.active_tasks == 0, 10)


def test_a_normal_task_raised_to_urgent_overtakes_the_queue(fleet, capsys):
    from llm_planner.domain.names import SET_URGENCY_SERVICE
    from llm_planner_interfaces.srv import SetUrgency

    c = fleet.client
    ids = [f"q{n}" for n in range(6)]
    operator = Ctl()
    try:
        service = operator.node.create_client(SetUrgency, SET_URGENCY_SERVICE)
        assert service.wait_for_service(timeout_sec=10)
        for n, task_id in enumerate(ids):  # one generation at a time: the others queue
            c.publish(task_id, f"drone{n}", instruction(2))
        assert wait_until(lambda: c.first("q5", TaskState.QUEUED) is not None, 10)
        asked_at = time.monotonic()
        answer = operator.wait(service.call_async(SetUrgency.Request(task_id="q5", urgency=1)), 10)
    finally:
        operator.close()
    assert answer.success and answer.message.startswith("q5: urgent, TUF beta 2.0"), answer.message
    assert c.wait_terminal(set(ids), timeout=60)
    generating = {task_id: c.first(task_id, TaskState.GENERATING)[0] for task_id in ids}
    waiting = [t for t in ids if generating[t] > asked_at]  # still queued when it was raised
    order = sorted(waiting, key=generating.get)
    assert len(order) >= 3 and order[0] == "q5", order
    assert all(c.terminal(task_id).state == TaskState.SUCCEEDED for task_id in ids)
    assert ctl(["urgency", "q5", "normal"]) == 1  # ended: nothing to change
    assert "has ended (SUCCEEDED)" in capsys.readouterr().out


def test_list_and_cancel_tasks_in_flight(fleet, capsys):
    """Three tasks for the slow drone: one executes, the others wait for it."""
    c = fleet.client
    for task_id in ("busy", "w0", "w1"):
        c.publish(task_id, "slow", instruction(3))
    assert wait_until(lambda: c.first("busy", TaskState.EXECUTING) is not None, 30)
    capsys.readouterr()
    assert ctl(["list"]) == 0
    rows = {row[1]: row for row in (line.split() for line in capsys.readouterr().out.splitlines()[1:])}
    assert {"busy", "w0", "w1"} <= set(rows)
    busy = rows["busy"]  # its robot executes; its generation may be suspended between segments
    assert busy[2] == "slow" and busy[3] in ("EXECUTING", "SUSPENDED", "GENERATING") and busy[4] == "normal"
    assert ctl(["cancel", "w1"]) == 0 and ctl(["cancel", "busy", "--reason", "operator drill"]) == 0
    assert c.wait_terminal({"busy", "w0", "w1"}, timeout=60)
    assert c.terminal("w1").state == TaskState.CANCELED and c.terminal("w1").message == CANCELED_BY_OPERATOR
    assert c.terminal("busy").state == TaskState.CANCELED and c.terminal("busy").message == "operator drill"
    assert c.terminal("w0").state == TaskState.SUCCEEDED  # the robot went on with the next task
    capsys.readouterr()
    assert ctl(["cancel", "w1"]) == 1
    assert "no queued or running task 'w1'" in capsys.readouterr().out


def test_the_safety_gate_stops_a_forbidden_call_and_waits_for_approvals(fleet, capsys):
    c = fleet.client
    c.publish("climb", "gated", instruction(3))  # mu(80) first: the gate forbids it
    c.publish("photo", "gated", instruction(1))  # s('bottle');g('bottle');tp();...: tp waits for approval
    c.publish("photo2", "drone0", instruction(1))  # another robot: no gate
    assert c.wait_terminal({"climb", "photo2"}, timeout=30)
    assert c.terminal("climb").state == TaskState.FAILED and c.segments_executing("climb") == []
    assert "mu(80): skill mu is not allowed for this robot" in c.terminal("climb").message
    assert c.terminal("photo2").state == TaskState.SUCCEEDED

    def waiting() -> bool:
        assert ctl(["list"]) == 0
        rows = [line.split() for line in capsys.readouterr().out.splitlines()[1:]]
        return any(row[1] == "photo" and row[-1] == "tp()" for row in rows)

    assert wait_until(waiting, 20)
    sent_before = c.segments_executing("photo")
    assert ctl(["approve", "photo"]) == 0
    assert c.wait_terminal({"photo"}, timeout=30) and c.terminal("photo").state == TaskState.SUCCEEDED
    assert len(c.segments_executing("photo")) > len(sent_before)

    c.publish("photo3", "gated", instruction(1))
    # refused ("not waiting for an approval") until its tp() is held for one
    assert wait_until(lambda: ctl(["deny", "photo3", "--reason", "people below"]) == 0, 20)
    assert c.wait_terminal({"photo3"}, timeout=30)
    assert c.terminal("photo3").state == TaskState.FAILED
    assert c.terminal("photo3").message == "tp() denied by an operator: people below"
    assert ctl(["approve", "photo3"]) == 1


def test_a_task_sent_twice_under_one_id_leaves_the_first_ones_goal_alone(fleet):
    from rclpy.action import ActionClient

    from llm_planner.domain.names import PLAN_TASK_ACTION
    from llm_planner_interfaces.action import PlanTask
    from llm_planner_interfaces.msg import Task

    c = fleet.client
    client = Ctl()
    try:
        action = ActionClient(client.node, PlanTask, PLAN_TASK_ACTION)
        assert action.wait_for_server(timeout_sec=10)
        client.settle()
        goal = PlanTask.Goal(task=Task(task_id="twice", robot_id="slow", instruction=instruction(3)))
        handle = client.wait(action.send_goal_async(goal), 10)
        assert handle.accepted and wait_until(lambda: c.first("twice", TaskState.QUEUED) is not None, 10)
        c.publish("twice", "drone0", instruction(3))  # the topic: refused as a duplicate
        assert wait_until(lambda: any(m.state == TaskState.REJECTED for _, m in c.statuses["twice"]), 10)
        assert ctl(["cancel", "twice"]) == 0  # the first one is still in flight
        result = client.wait(handle.get_result_async(), 20)
    finally:
        client.close()
    assert result.result.status.state == TaskState.CANCELED and result.result.status.message == CANCELED_BY_OPERATOR
