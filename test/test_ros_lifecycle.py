"""The planner as a managed node over real ROS 2: transitions through the standard
change_state / get_state services (by `llm-planner-ctl lifecycle`), and what each does to tasks."""

import pytest
from ros_fixtures import instruction, start_fleet, wait_until

from llm_planner.domain.tasks import TaskState
from llm_planner.ros.control import NOT_ACTIVE
from llm_planner.ros.ctl import main as ctl
from llm_planner.settings.config import LifecycleConfig
from llm_planner.settings.fleet import RobotConfig

pytestmark = pytest.mark.ros


@pytest.fixture(scope="module")
def managed():
    robots = [RobotConfig(id="drone1", type="tello", options={"time_scale": 0.05, "seed": 1}),
              RobotConfig(id="slow", type="tello", options={"time_scale": 1.0})]
    running = start_fleet(robots, lifecycle=LifecycleConfig(autostart=False, deactivate="cancel"))
    yield running
    running.stop()


def state(capsys) -> str:
    capsys.readouterr()
    assert ctl(["lifecycle", "get"]) == 0
    return capsys.readouterr().out.strip()


def transition(capsys, name: str) -> str:
    capsys.readouterr()
    assert ctl(["lifecycle", name]) == 0, name
    return capsys.readouterr().out.strip().splitlines()[-1]


def executing_on_slow(client, task_id: str) -> None:
    """A task on the slow drone, in the middle of its first call."""
    client.publish(task_id, "slow", instruction(3))
    assert wait_until(lambda: client.first(task_id, TaskState.EXECUTING) is not None, 30)


def test_the_planner_goes_through_its_lifecycle(managed, capsys):
    c, node = managed.client, managed.fleet.planner_node
    assert state(capsys) == "unconfigured" and node.planner is None
    c.publish("early", "drone1", instruction(3))
    assert c.wait_terminal({"early"}, timeout=10)
    assert c.terminal("early").state == TaskState.REJECTED and c.terminal("early").message == NOT_ACTIVE

    assert transition(capsys, "configure") == "inactive" and node.planner is not None
    c.publish("inactive", "drone1", instruction(3))
    assert c.wait_terminal({"inactive"}, timeout=10)
    assert c.terminal("inactive").message == NOT_ACTIVE

    assert transition(capsys, "activate") == "active"
    c.publish("ok", "drone1", instruction(3))
    assert c.wait_terminal({"ok"}, timeout=30) and c.terminal("ok").state == TaskState.SUCCEEDED

    # deactivate with lifecycle.deactivate: cancel ends the task in flight with the reason
    executing_on_slow(c, "running")
    assert transition(capsys, "deactivate") == "inactive"
    assert c.wait_terminal({"running"}, timeout=10)
    assert c.terminal("running").state == TaskState.CANCELED and c.terminal("running").message == "planner deactivated"
    c.publish("after", "drone1", instruction(3))
    assert c.wait_terminal({"after"}, timeout=10) and c.terminal("after").message == NOT_ACTIVE

    assert transition(capsys, "cleanup") == "unconfigured" and node.planner is None
    assert ctl(["list"]) == 0  # no planner: no tasks, and no error
    assert transition(capsys, "configure") == "inactive"  # configured again: a fresh planner
    assert transition(capsys, "activate") == "active"
    c.publish("again", "drone1", instruction(3))
    assert c.wait_terminal({"again"}, timeout=30) and c.terminal("again").state == TaskState.SUCCEEDED

    executing_on_slow(c, "last")
    assert transition(capsys, "shutdown") == "finalized"
    assert c.wait_terminal({"last"}, timeout=10)
    assert c.terminal("last").state == TaskState.CANCELED and c.terminal("last").message == "planner shutting down"
    capsys.readouterr()
    assert ctl(["lifecycle", "activate"]) == 1  # nothing leaves finalized
    assert "refused or failed" in capsys.readouterr().out
