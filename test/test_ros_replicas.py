"""A planner node whose engine replicas are Ray actors, over real rclpy/Fast DDS: tasks
published on /llm_planner/tasks are planned on both replicas and all succeed."""

import pytest
from ros_fixtures import instruction, start_fleet

from llm_planner.settings.fleet import RobotConfig

ray = pytest.importorskip("ray")

pytestmark = [pytest.mark.ros, pytest.mark.ray]

FAST = {"time_scale": 0.05}


def test_a_planner_node_with_two_replicas_on_ray_plans_every_task():
    robots = [RobotConfig(id=f"drone{i}", type="tello", options=dict(FAST, seed=i)) for i in (1, 2, 3)]
    running = start_fleet(robots, replicas=2, placement="round-robin")
    try:
        planner = running.fleet.planner_node.planner
        assert len(planner.replicas) == 2 and not planner.replicas.virtual
        jobs = {f"r{i}": (f"drone{1 + i % 3}", 1 + i % 3) for i in range(6)}
        for task_id, (robot, trace) in jobs.items():
            running.client.publish(task_id, robot, instruction(trace))
        assert running.client.wait_terminal(jobs, timeout=90)
        for task_id in jobs:
            final = running.client.terminal(task_id)
            assert final.state == final.SUCCEEDED, (task_id, final.message)
        steps = [replica.engine.stats.steps for replica in planner.replicas]
        assert all(n > 0 for n in steps), steps  # round-robin: both replicas generated
    finally:
        running.stop()
        ray.shutdown()
