"""Over real rclpy: the urgent-before-backlog property, and a 500-task burst on 50 robots."""

import time

import pytest
from ros_fixtures import TRACES, instruction, start_fleet

from llm_planner.settings.fleet import RobotConfig

pytestmark = [pytest.mark.ros, pytest.mark.slow]


def test_urgent_first_segment_overtakes_a_backlog():
    robots = [RobotConfig(id="drone1", type="tello", options={"time_scale": 0.05}),
              RobotConfig(id="drone2", type="tello", options={"time_scale": 0.05}),
              RobotConfig(id="arm1", type="indy7", options={"time_scale": 0.05})]
    running = start_fleet(robots, batch={"max_batch_size": 2})
    try:
        c = running.client
        backlog = [f"backlog{i}" for i in range(12)]
        for i, task_id in enumerate(backlog):
            c.publish(task_id, "arm1" if i % 2 else "drone1", instruction(10 if i % 2 else 3))
        time.sleep(0.05)
        c.publish("urgent", "drone2", instruction(7), urgency=1)
        assert c.wait_terminal(backlog + ["urgent"], timeout=120)
        first_exec = {t: c.first(t, 3)[0] for t in backlog + ["urgent"]}
        overtaken = sum(first_exec[t] > first_exec["urgent"] for t in backlog)
        assert overtaken >= 8, first_exec
        assert c.terminal("urgent").state == c.terminal("urgent").SUCCEEDED
    finally:
        running.stop()


def test_burst_of_500_tasks_on_50_robots_loses_nothing():
    robots = [RobotConfig(id=f"r{i:02d}", type="tello", options={"time_scale": 0.002, "seed": i}) for i in range(50)]
    running = start_fleet(robots, batch={"max_batch_size": 64})
    try:
        c = running.client
        ids = [f"burst{i}" for i in range(500)]
        traces = [1, 2, 3, 4, 5, 6, 7, 8]
        for i, task_id in enumerate(ids):
            trace = traces[i % len(traces)]
            urgency = 1 if TRACES[trace].urgency == "urgent" else 0
            c.publish(task_id, f"r{i % 50:02d}", instruction(trace), urgency=urgency)
        assert c.wait_terminal(ids, timeout=240), sum(c.terminal(t) is not None for t in ids)
        for task_id in ids:
            finals = [m for _, m in c.statuses[task_id] if m.state >= 4]
            assert len(finals) == 1, (task_id, [m.state for m in finals])  # exactly one terminal status
            assert finals[0].state == finals[0].SUCCEEDED, (task_id, finals[0].message)
        assert set(c.statuses) == set(ids)
    finally:
        running.stop()
