"""The hop marks benchmarks/ros_overhead.py times the ROS path with (llm_planner/ros/hops.py):
every node of a fleet marks a task's segments as they pass it, in both link layouts, and
the marks of one segment follow its path in time."""

import pytest
from ros_fixtures import instruction, start_fleet

from llm_planner.ros.hops import ENV, read_hops
from llm_planner.settings.fleet import RobotConfig

pytestmark = pytest.mark.ros

# One segment's path, in the order it is passed (the goal's response and feedback are
# answered while the robot runs, so only their own hop is ordered: after accepted / started).
PATH = ["published", "received", "enqueued", "decided", "sent", "taken", "accepted", "started", "ended", "result"]


@pytest.mark.parametrize("robot_links", ["threads", "process"])
def test_every_hop_of_a_segment_is_marked_in_the_order_it_is_passed(robot_links, tmp_path, monkeypatch):
    monkeypatch.setenv(ENV, str(tmp_path))  # read by each node as it is made (the links' process inherits it)
    running = start_fleet([RobotConfig(id="hop", type="tello", options={"time_scale": 0.001})],
                          robot_links=robot_links)
    try:
        running.client.publish("marked", "hop", instruction(7))
        assert running.client.wait_terminal(["marked"], timeout=60)
        assert running.client.terminal("marked").state == running.client.terminal("marked").SUCCEEDED
    finally:
        running.stop()  # each node writes its marks as it is destroyed
    marks = read_hops(tmp_path)
    first = marks[("marked", 0)]
    assert [hop for hop in PATH if hop in first] == PATH, sorted(first)
    times = [first[hop] for hop in PATH]
    assert times == sorted(times), dict(zip(PATH, times))
    assert first["acknowledged"] >= first["sent"] and first["reported"] >= first["started"]
    later = [index for task, index in marks if task == "marked" and index > 0]
    for index in later:  # every further segment of the plan went the robot's way too
        assert {"decided", "sent", "taken", "accepted", "started", "ended", "result"} <= set(marks[("marked", index)])
