"""The robot links' process (robot_links: process) as a fault: it keeps the timeouts of the
segments out, so if it ends they fail at once with the reason, and so does every segment
sent after (no task waits for good)."""

import time

import pytest
from ros_fixtures import instruction, start_fleet

from llm_planner.settings.fleet import RobotConfig

pytestmark = pytest.mark.ros


def test_segments_fail_with_why_when_the_links_process_ends():
    running = start_fleet([RobotConfig(id="slow", type="tello", options={"time_scale": 1.0})],
                          robot_links="process")
    try:
        c = running.client
        c.publish("cut-off", "slow", instruction(1))
        deadline = time.monotonic() + 30
        while not c.segments_executing("cut-off") and time.monotonic() < deadline:
            time.sleep(0.05)
        assert c.segments_executing("cut-off"), "the task never reached its robot"
        running.fleet.planner_node.port._process.kill()
        assert c.wait_terminal(["cut-off"], timeout=30)
        final = c.terminal("cut-off")
        assert final.state == final.FAILED and "robot links' process ended" in final.message, final.message
        c.publish("after", "slow", instruction(7))
        assert c.wait_terminal(["after"], timeout=30)
        after = c.terminal("after")
        assert after.state == after.FAILED and "robot links' process ended" in after.message, after.message
    finally:
        running.stop()
