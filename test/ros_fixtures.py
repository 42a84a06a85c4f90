"""Real rclpy fixtures for the tests: a module that imports this one is skipped without a built
ROS 2 workspace, except under `make test`, where a missing workspace is an error."""

import os

import pytest

if os.environ.get("LLM_PLANNER_REQUIRE_ROS"):
    import llm_planner_interfaces  # noqa: F401
    import rclpy
else:
    rclpy = pytest.importorskip("rclpy", reason="ROS 2 workspace not sourced (run tests via `make test`)")
    pytest.importorskip("llm_planner_interfaces", reason="interfaces not built (run `make setup`)")

from llm_planner.testing.ros_fleet import TRACES, Running, instruction, start_fleet  # noqa: E402

__all__ = ["TRACES", "Running", "instruction", "rclpy", "start_fleet"]
