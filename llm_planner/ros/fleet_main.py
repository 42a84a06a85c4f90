"""`llm-planner-fleet`: the planner node and every robot server of a fleet in one process
(MultiThreadedExecutor), for machines without `ros2 launch`. launch/fleet.launch.py starts
the same set as separate processes from `node_specs`."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from dataclasses import dataclass, field

from llm_planner.catalog.exec_model import load_exec_model
from llm_planner.catalog.skills import load_skill_set
from llm_planner.robots.backends import make_backend
from llm_planner.ros.spin import spin_in_thread
from llm_planner.settings.config import ConfigError, PlannerConfig, load_planner_config
from llm_planner.settings.fleet import FleetConfig, load_fleet


@dataclass
class NodeSpec:
    """One node as a launch file starts it: executable, name, arguments."""

    executable: str
    name: str
    arguments: list[str] = field(default_factory=list)


def node_specs(planner_config: str | None, fleet_file: str | None, policy: str | None = None) -> list[NodeSpec]:
    """The nodes of a fleet launch: one robot server per robot, then the planner."""
    fleet = load_fleet(fleet_file)
    common = (["--config", planner_config] if planner_config else []) + (["--fleet", fleet_file] if fleet_file else [])
    specs = [NodeSpec("llm-planner-robot", f"{r.id}_server", common + ["--robot", r.id]) for r in fleet.robots]
    specs.append(NodeSpec("llm-planner-node", "llm_planner", common + (["--policy", policy] if policy else [])))
    return specs


def make_robot_servers(config: PlannerConfig, fleet: FleetConfig, only: str | None = None):
    from llm_planner.ros.robot_server import RobotServer

    servers = []
    for robot in fleet.robots:
        if only is not None and robot.id != only:
            continue
        rt = config.robot_type(robot.type)
        backend = make_backend(robot.backend, load_exec_model(rt.exec_model), robot.options)
        servers.append(RobotServer(robot, load_skill_set(rt.skill_set), backend))
    if only is not None and not servers:
        raise ConfigError(f"robot {only!r} is not in the fleet")
    return servers


class Fleet:
    """Planner + robot servers spinning in one MultiThreadedExecutor on a background thread."""

    def __init__(self, config: PlannerConfig, fleet: FleetConfig, traces: list[str] | None = None,
                 with_planner: bool = True, engine=None) -> None:
        import rclpy
        from rclpy.executors import MultiThreadedExecutor

        from llm_planner.ros.planner_node import PlannerNode

        if not rclpy.ok():
            rclpy.init()
        fleet.check_types(config.robot_types)
        self.robots = make_robot_servers(config, fleet)
        self.planner_node = PlannerNode(config, fleet, traces, engine=engine) if with_planner else None
        # A robot holds an executor thread while it moves: one each, plus some for the planner.
        self.executor = MultiThreadedExecutor(num_threads=2 * len(self.robots) + 4)  # + a prestarted goal each
        for node in self.nodes:
            self.executor.add_node(node)
        self._thread = None

    @property
    def nodes(self):
        return self.robots + ([self.planner_node] if self.planner_node else [])

    def start(self, wait_s: float = 30.0) -> Fleet:
        """Spin, and wait until the planner has a round trip with every robot."""
        self._thread = spin_in_thread(self.executor, "fleet-executor")
        if self.planner_node is not None:
            self.unreachable = self.planner_node.wait_for_robots(wait_s)
        return self

    def robot(self, robot_id: str):
        return next(r for r in self.robots if r.robot.id == robot_id)

    def remove_robot(self, robot_id: str) -> None:
        """Take a robot server off the network (fault drills)."""
        server = self.robot(robot_id)
        server.stop()
        self.executor.remove_node(server)
        self.robots.remove(server)
        server.destroy_node()

    def shutdown(self) -> None:
        for robot in self.robots:
            robot.stop()
        self.executor.shutdown(timeout_sec=2.0)
        for node in self.nodes:
            node.destroy_node()
        if self._thread is not None:
            self._thread.join(timeout=5)


def _load(args) -> tuple[PlannerConfig, FleetConfig]:
    config = load_planner_config(args.config, policy=getattr(args, "policy", None))
    fleet = load_fleet(args.fleet)
    fleet.check_types(config.robot_types)
    return config, fleet


def _spin_until_signal(nodes) -> None:
    import rclpy
    from rclpy.executors import MultiThreadedExecutor

    executor = MultiThreadedExecutor(num_threads=2 * len(nodes) + 4)  # + a prestarted goal per robot
    for node in nodes:
        executor.add_node(node)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    spin_in_thread(executor)
    try:
        # rclpy's own SIGINT handler shuts the context down: that is our Ctrl-C too
        while not stop.wait(0.2) and rclpy.ok():
            pass
    except KeyboardInterrupt:
        pass
    for node in nodes:
        if hasattr(node, "stop"):
            node.stop()
    executor.shutdown(timeout_sec=2.0)
    for node in nodes:
        node.destroy_node()
    rclpy.try_shutdown()


def _parser(description: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--config", help="planner config (default config/planner.yaml)")
    p.add_argument("--fleet", help="fleet file (default config/fleet.yaml)")
    return p


def main(argv: list[str] | None = None) -> int:
    p = _parser("Start the planner node and all robot servers of a fleet in one process.")
    p.add_argument("--policy", help="override the config's policy")
    p.add_argument("--engine", choices=["sim", "vllm"], help="override the config's engine")
    p.add_argument("--traces", action="append", help="trace sets with recorded plans for the sim engine "
                                                     "(default: timely_tasks; repeatable)")
    p.add_argument("--exec-samples", help="on exit, write every measured call time to this CSV "
                                          "(input of `llm-planner fit`)")
    args = p.parse_args(argv)
    try:
        config = load_planner_config(args.config, policy=args.policy, engine=args.engine)
        fleet = load_fleet(args.fleet)
        fleet.check_types(config.robot_types)
        import rclpy

        rclpy.init()
        from llm_planner.ros.planner_node import PlannerNode

        nodes = make_robot_servers(config, fleet) + [PlannerNode(config, fleet, args.traces)]
    except (ConfigError, ValueError, RuntimeError) as exc:
        print(f"llm-planner-fleet: {exc}", file=sys.stderr)
        return 2
    planner_node = nodes[-1]
    threading.Thread(target=planner_node.wait_for_robots, daemon=True).start()
    print(f"fleet up: planner + {len(fleet.robots)} robots ({', '.join(r.id for r in fleet.robots)}); "
          f"ROS_DOMAIN_ID={os.environ.get('ROS_DOMAIN_ID', '0')}. Ctrl-C to stop.", flush=True)
    samples = planner_node.planner.exec_samples
    _spin_until_signal(nodes)
    if args.exec_samples:
        from llm_planner.catalog.exec_model import write_samples_csv

        print(f"wrote {write_samples_csv(args.exec_samples, list(samples))} call times to {args.exec_samples}")
    return 0


def planner_main(argv: list[str] | None = None) -> int:
    p = _parser("Start the planner node alone (robots run elsewhere).")
    p.add_argument("--policy")
    p.add_argument("--traces", action="append")
    args = p.parse_args(argv)
    try:
        config, fleet = _load(args)
        import rclpy

        rclpy.init()
        from llm_planner.ros.planner_node import PlannerNode

        node = PlannerNode(config, fleet, args.traces)
    except (ConfigError, ValueError, RuntimeError) as exc:
        print(f"llm-planner-node: {exc}", file=sys.stderr)
        return 2
    _spin_until_signal([node])
    return 0


def robot_main(argv: list[str] | None = None) -> int:
    p = _parser("Start one robot's action server.")
    p.add_argument("--robot", required=True, help="robot id from the fleet file")
    args = p.parse_args(argv)
    try:
        config, fleet = _load(args)
        import rclpy

        rclpy.init()
        nodes = make_robot_servers(config, fleet, only=args.robot)
    except (ConfigError, ValueError) as exc:
        print(f"llm-planner-robot: {exc}", file=sys.stderr)
        return 2
    _spin_until_signal(nodes)
    return 0


if __name__ == "__main__":
    sys.exit(main())
