"""A bug in the live planner fails fast: the planner's thread stops, every task in flight ends
FAILED with the reason, and the node's context shuts down. Run in a child process of its own,
whose ROS 2 context it ends."""

import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.ros

CHILD = """
import json, os, time
import rclpy
from llm_planner.domain.tasks import TaskState
from llm_planner.settings.fleet import RobotConfig
from llm_planner.testing.ros_fleet import instruction, start_fleet

running = start_fleet([RobotConfig(id="slow", type="tello", options={"time_scale": 1.0})])
client, node = running.client, running.fleet.planner_node
client.publish("inflight", "slow", instruction(3))
deadline = time.monotonic() + 30
while client.first("inflight", TaskState.EXECUTING) is None and time.monotonic() < deadline:
    time.sleep(0.05)
executing = client.first("inflight", TaskState.EXECUTING) is not None
node.driver.post(lambda: 1 / 0)  # a bug in a planner event
ended = client.wait_terminal({"inflight"}, timeout=15)
deadline = time.monotonic() + 10
while rclpy.ok() and time.monotonic() < deadline:
    time.sleep(0.05)
final = client.terminal("inflight")
print(json.dumps({"executing": executing, "ended": ended, "state": None if final is None else final.state,
                  "message": "" if final is None else final.message, "context_ok": rclpy.ok(),
                  "failure": repr(node.failure)}), flush=True)
os._exit(0)
"""


def test_a_planner_bug_ends_the_tasks_in_flight_and_the_node():
    env = dict(os.environ, ROS_DOMAIN_ID="63", ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST")
    child = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=180, env=env)
    lines = [line for line in child.stdout.splitlines() if line.startswith("{")]
    assert lines, child.stdout[-2000:] + child.stderr[-4000:]
    seen = json.loads(lines[-1])
    assert seen["executing"] and seen["ended"], seen
    from llm_planner.domain.tasks import TaskState

    assert seen["state"] == TaskState.FAILED, seen
    assert seen["message"].startswith("the planner failed (ZeroDivisionError: division by zero)"), seen
    assert not seen["context_ok"] and seen["failure"].startswith("ZeroDivisionError"), seen
    assert "the planner failed and stops" in child.stderr and "Traceback" in child.stderr  # logged with it
