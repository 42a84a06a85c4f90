"""`llm-planner-fleet`: the planner node and every robot server of a fleet in one process
(each node spinning in its own executor), for machines without `ros2 launch`. launch/fleet.launch.py starts
the same set as separate processes from `node_specs`."""

from __future__ import annotations

import argparse
import faulthandler
import os
import signal
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from llm_planner.catalog.exec_model import load_exec_model
from llm_planner.catalog.skills import load_skill_set
from llm_planner.domain.names import robot_server_node
from llm_planner.robots.backends import make_backend
from llm_planner.settings.config import PlannerConfig, load_planner_config
from llm_planner.settings.fleet import FleetConfig, load_fleet
from llm_planner.settings.model_file import ConfigError

if TYPE_CHECKING:  # ros/spin.py imports rclpy, which this module imports only where it is used
    from llm_planner.ros.spin import Spinning


@dataclass
class NodeSpec:
    """One process as a launch file starts it: executable, node name (None: a process of
    several robot servers, each keeping its own name), arguments."""

    executable: str
    name: str | None
    arguments: list[str] = field(default_factory=list)

    def command(self) -> list[str]:
        """The command line `ros2 launch` runs for this spec (launch_ros adds the node name)."""
        return [self.executable, *self.arguments, *(["--ros-args", "-r", f"__node:={self.name}"] if self.name else [])]


def node_specs(
    planner_config: str | None,
    fleet_file: str | None,
    policy: str | None = None,
    robots_per_process: int = 1,
    params_file: str | None = None,
) -> list[NodeSpec]:
    """The processes of a fleet launch: robot servers (one per process by default), then the
    planner, given the planner node's ROS 2 params file and a policy that overrides it. With
    ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST, Fast DDS finds at most 32 processes on one host
    (rmw_fastrtps sets maxInitialPeersRange=32): a fleet of more than 30 robots on one host
    needs several robots per process (the planner's robot links are a process of their own
    unless its robot_links parameter is threads)."""
    if robots_per_process < 1:
        raise ConfigError(f"robots_per_process must be at least 1, not {robots_per_process}")
    fleet = load_fleet(fleet_file)
    common = (["--config", planner_config] if planner_config else []) + (["--fleet", fleet_file] if fleet_file else [])
    specs = []
    for start in range(0, len(fleet.robots), robots_per_process):
        group = fleet.robots[start : start + robots_per_process]
        name = robot_server_node(group[0].id) if len(group) == 1 else None
        specs.append(NodeSpec("llm-planner-robot", name, common + [a for r in group for a in ("--robot", r.id)]))
    # Later ROS arguments win: the policy argument over the params file.
    ros_args = (["--params-file", params_file] if params_file else []) + (["-p", f"policy:={policy}"] if policy else [])
    specs.append(NodeSpec("llm-planner-node", "llm_planner", common + (["--ros-args", *ros_args] if ros_args else [])))
    return specs


def make_robot_servers(config: PlannerConfig, fleet: FleetConfig, only: list[str] | None = None):
    """A server for every robot of the fleet, or for the robots named in `only`."""
    from llm_planner.ros.robot_server import RobotServer

    servers = []
    for robot in fleet.robots:
        if only is not None and robot.id not in only:
            continue
        rt = config.robot_type(robot.type)
        backend = make_backend(robot.backend, load_exec_model(rt.exec_model), robot.options)
        servers.append(RobotServer(robot, load_skill_set(rt.skill_set), backend, result_kept_s=fleet.result_kept_s))
    return servers


class Fleet:
    """Planner + robot servers, each spinning in its own executor on a background thread."""

    def __init__(
        self,
        config: PlannerConfig,
        fleet: FleetConfig,
        traces: list[str] | None = None,
        with_planner: bool = True,
        engine=None,
    ) -> None:
        import rclpy

        from llm_planner.ros.planner_node import PlannerNode

        if not rclpy.ok():
            rclpy.init()
        fleet.check_types(config.robot_types)
        self.robots = make_robot_servers(config, fleet)
        self.planner_node = PlannerNode(config, fleet, traces, engine=engine) if with_planner else None
        self._spinning: Spinning | None = None  # once started

    @property
    def nodes(self):
        """The planner first: at shutdown it stops planning before the robots stop."""
        return ([self.planner_node] if self.planner_node else []) + self.robots

    def start(self, wait_s: float = 30.0) -> Fleet:
        """Spin, and wait until the planner has a round trip with every robot."""
        from llm_planner.ros.spin import Spinning

        self._spinning = Spinning(self.nodes)
        if self.planner_node is not None:
            self.unreachable = self.planner_node.wait_for_robots(wait_s)
        return self

    def robot(self, robot_id: str):
        return next(r for r in self.robots if r.robot.id == robot_id)

    def remove_robot(self, robot_id: str) -> None:
        """Take a robot server off the network (fault drills)."""
        server = self.robot(robot_id)
        self.robots.remove(server)
        assert self._spinning is not None  # a drill on a started fleet
        self._spinning.remove(server)

    def shutdown(self) -> None:
        if self._spinning is not None:
            self._spinning.shutdown()
        else:
            for node in self.nodes:
                node.destroy_node()


def _load(args) -> tuple[PlannerConfig, FleetConfig]:
    config = load_planner_config(args.config, policy=getattr(args, "policy", None))
    fleet = load_fleet(args.fleet)
    fleet.check_types(config.robot_types)
    return config, fleet


def _init_ros(argv: list[str]) -> None:
    """rclpy, given the ROS arguments of the command line (`--ros-args ...`), without its
    signal handlers: they would shut the context down at Ctrl-C or SIGTERM while the nodes
    are still being stopped and destroyed (a node's destruction then hung);
    `_spin_until_signal` handles both signals and shuts down in order."""
    import rclpy
    from rclpy.signals import SignalHandlerOptions

    rclpy.init(args=[sys.argv[0], *argv], signal_handler_options=SignalHandlerOptions.NO)


# A clean stop takes a few seconds (ros/spin.py bounds each part); past this, every
# thread's stack goes to stderr and the process exits, so a hung stop is seen and ends.
SHUTDOWN_LIMIT_S = 30.0


def _spin_until_signal(nodes) -> None:
    """Spin until SIGINT or SIGTERM, then stop in order. The handler only appends to a list:
    a handler runs in the main thread between any two bytecodes, and one taking a lock (as
    `threading.Event.set()` does) can find it held by the code it interrupted and wait
    forever, while the other threads go on planning."""
    import rclpy

    from llm_planner.ros.spin import Spinning

    spinning = Spinning(nodes)
    signals: list[int] = []
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda signum, _frame: signals.append(signum))
    while not signals and rclpy.ok():
        time.sleep(0.2)
    faulthandler.dump_traceback_later(SHUTDOWN_LIMIT_S, exit=True)
    spinning.shutdown()
    rclpy.try_shutdown()
    faulthandler.cancel_dump_traceback_later()


def _parser(description: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        description=description,
        epilog="ROS 2 arguments follow --ros-args (as `ros2 launch` "
        "and `ros2 run` pass them), e.g. --ros-args --params-file config/planner_params.yaml",
    )
    p.add_argument("--config", help="planner config (default config/planner.yaml)")
    p.add_argument("--fleet", help="fleet file (default config/fleet.yaml)")
    return p


def _parse(p: argparse.ArgumentParser, argv: list[str] | None) -> tuple[argparse.Namespace, list[str]]:
    """This program's arguments, and the whole command line for rclpy (its --ros-args). A
    `--policy` goes to rclpy last, as a parameter, so that it wins over a params file's."""
    from rclpy.utilities import remove_ros_args

    argv = list(sys.argv[1:] if argv is None else argv)
    args = p.parse_args(remove_ros_args([sys.argv[0], *argv])[1:])
    if getattr(args, "policy", None):
        argv += ["--ros-args", "-p", f"policy:={args.policy}"]
    return args, argv


def main(argv: list[str] | None = None) -> int:
    p = _parser("Start the planner node and all robot servers of a fleet in one process.")
    p.add_argument("--policy", help="override the config's policy")
    p.add_argument("--engine", choices=["sim", "vllm"], help="override the config's engine")
    p.add_argument(
        "--traces",
        action="append",
        help="trace sets with recorded plans for the sim engine (default: timely_tasks; repeatable)",
    )
    p.add_argument(
        "--exec-samples", help="on exit, write every measured call time to this CSV (input of `llm-planner fit`)"
    )
    p.add_argument(
        "--live-view",
        type=int,
        metavar="PORT",
        help="serve the live view to Foxglove on 127.0.0.1:PORT (0: any free port)",
    )
    args, argv = _parse(p, argv)
    if args.live_view is not None:  # as a parameter, over a params file's
        argv += ["--ros-args", "-p", f"live_view.port:={args.live_view}"]
    try:
        config = load_planner_config(args.config, policy=args.policy, engine=args.engine)
        fleet = load_fleet(args.fleet)
        fleet.check_types(config.robot_types)
        _init_ros(argv)
        from llm_planner.ros.planner_node import PlannerNode

        nodes = [PlannerNode(config, fleet, args.traces)] + make_robot_servers(config, fleet)
    except (ConfigError, ValueError, RuntimeError) as exc:
        print(f"llm-planner-fleet: {exc}", file=sys.stderr)
        return 2
    planner_node = nodes[0]
    threading.Thread(target=planner_node.wait_for_robots, daemon=True).start()
    print(
        f"fleet up: planner + {len(fleet.robots)} robots ({', '.join(r.id for r in fleet.robots)}); "
        f"ROS_DOMAIN_ID={os.environ.get('ROS_DOMAIN_ID', '0')}. Ctrl-C to stop.",
        flush=True,
    )
    if planner_node.view is not None and planner_node.view.url:
        print(
            f"live view: open {planner_node.view.url} in Foxglove (Open connection, Foxglove WebSocket; "
            "layout config/foxglove/llm_planner.json)",
            flush=True,
        )
    samples = planner_node.planner.exec_samples
    _spin_until_signal(nodes)
    if planner_node.failure is not None:
        return 1
    if args.exec_samples:
        from llm_planner.catalog.exec_model import write_samples_csv

        print(f"wrote {write_samples_csv(args.exec_samples, list(samples))} call times to {args.exec_samples}")
    return 0


def planner_main(argv: list[str] | None = None) -> int:
    p = _parser("Start the planner node alone (robots run elsewhere).")
    p.add_argument("--policy", help="override the config's policy (and a params file's)")
    p.add_argument("--traces", action="append", help="trace sets with recorded plans for the sim engine")
    args, argv = _parse(p, argv)
    try:
        config, fleet = _load(args)
        _init_ros(argv)
        from llm_planner.ros.planner_node import PlannerNode

        node = PlannerNode(config, fleet, args.traces)
    except (ConfigError, ValueError, RuntimeError) as exc:
        print(f"llm-planner-node: {exc}", file=sys.stderr)
        return 2
    _spin_until_signal([node])
    return 0 if node.failure is None else 1


def robot_main(argv: list[str] | None = None) -> int:
    p = _parser("Start robot action servers (one, or several in one process).")
    p.add_argument("--robot", required=True, action="append", help="robot id from the fleet file (repeatable)")
    args, argv = _parse(p, argv)
    try:
        config, fleet = _load(args)
        missing = sorted(set(args.robot) - {r.id for r in fleet.robots})
        if missing:
            raise ConfigError(f"robots {missing} are not in the fleet")
        _init_ros(argv)
        nodes = make_robot_servers(config, fleet, only=args.robot)
    except (ConfigError, ValueError) as exc:
        print(f"llm-planner-robot: {exc}", file=sys.stderr)
        return 2
    _spin_until_signal(nodes)
    return 0


if __name__ == "__main__":
    sys.exit(main())
