"""Fleets of real ROS 2 nodes (a planner and robot servers) in this process, and a task client."""

import rclpy

from llm_planner.lrtrace.load import load_traces
from llm_planner.ros.fleet_main import Fleet
from llm_planner.ros.spin import spin_node
from llm_planner.ros.task_client import TaskClient
from llm_planner.settings.config import load_planner_config
from llm_planner.settings.fleet import RESULT_KEPT_S, FleetConfig, RobotConfig
from llm_planner.settings.paths import data_path

TRACES = load_traces(data_path("config", "traces", "timely_tasks.yaml")).by_id()


def instruction(trace_id: int) -> str:
    return TRACES[trace_id].instruction


class Running:
    def __init__(self, fleet: Fleet, client: TaskClient) -> None:
        self.fleet, self.client = fleet, client
        self._spinning = spin_node(client)
        assert client.wait_for_planner(15), "planner did not subscribe to /llm_planner/tasks"
        assert not fleet.unreachable, f"robots the planner had no round trip with: {fleet.unreachable}"
        assert fleet.planner_node is not None
        links = getattr(fleet.planner_node.port, "links", {})  # none here with robot_links: process
        for link in links.values():  # every action server discovered by the planner's clients
            assert link.client.wait_for_server(timeout_sec=15), link.robot_id

    def stop(self) -> None:
        self._spinning.shutdown()
        self.fleet.shutdown()


def start_fleet(
    robots: list[RobotConfig], robot_timeout_s: float = 10.0, result_kept_s: float = RESULT_KEPT_S, **config_overrides
) -> Running:
    if not rclpy.ok():
        rclpy.init()
    config = load_planner_config()
    batch = config.batch.model_copy(update=config_overrides.pop("batch", {}))
    config = config.model_copy(update={"batch": batch, **config_overrides})
    fleet = FleetConfig(robots=robots, robot_timeout_s=robot_timeout_s, result_kept_s=result_kept_s)
    return Running(Fleet(config, fleet).start(), TaskClient())
