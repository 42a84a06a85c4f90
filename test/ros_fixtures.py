"""Real rclpy fixtures: fleets of planner + robot servers in this process, a task client."""

import os

import pytest

if os.environ.get("LLM_PLANNER_REQUIRE_ROS"):  # `make test`: a missing ROS 2 is an error, not a skip
    import llm_planner_interfaces  # noqa: F401
    import rclpy
else:
    rclpy = pytest.importorskip("rclpy", reason="ROS 2 workspace not sourced (run tests via `make test`)")
    pytest.importorskip("llm_planner_interfaces", reason="interfaces not built (run `make setup`)")


from llm_planner.lrtrace.load import load_traces  # noqa: E402
from llm_planner.ros.fleet_main import Fleet  # noqa: E402
from llm_planner.ros.spin import spin_node  # noqa: E402
from llm_planner.ros.task_client import TaskClient  # noqa: E402
from llm_planner.settings.config import load_planner_config  # noqa: E402
from llm_planner.settings.fleet import RESULT_KEPT_S, FleetConfig, RobotConfig  # noqa: E402
from llm_planner.settings.paths import data_path  # noqa: E402

TRACES = load_traces(data_path("config", "traces", "timely_tasks.yaml")).by_id()


def instruction(trace_id: int) -> str:
    return TRACES[trace_id].instruction


class Running:
    def __init__(self, fleet: Fleet, client: TaskClient) -> None:
        self.fleet, self.client = fleet, client
        self._spinning = spin_node(client)
        assert client.wait_for_planner(15), "planner did not subscribe to /llm_planner/tasks"
        assert not fleet.unreachable, f"robots the planner had no round trip with: {fleet.unreachable}"
        links = getattr(fleet.planner_node.port, "links", {})  # none here with robot_links: process
        for link in links.values():  # every action server discovered by the planner's clients
            assert link.client.wait_for_server(timeout_sec=15), link.robot_id

    def stop(self) -> None:
        self._spinning.shutdown()
        self.fleet.shutdown()


def start_fleet(robots: list[RobotConfig], robot_timeout_s: float = 10.0, result_kept_s: float = RESULT_KEPT_S,
                **config_overrides) -> Running:
    if not rclpy.ok():
        rclpy.init()
    config = load_planner_config()
    batch = config.batch.model_copy(update=config_overrides.pop("batch", {}))
    config = config.model_copy(update={"batch": batch, **config_overrides})
    fleet = FleetConfig(robots=robots, robot_timeout_s=robot_timeout_s, result_kept_s=result_kept_s)
    return Running(Fleet(config, fleet).start(), TaskClient())
