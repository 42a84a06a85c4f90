"""The ROS path hop by hop: where a task's time goes between the task topic and the robot,
with 1 and 50 robots, with every node in one process and with the planner and each robot
server in processes of their own (the `ros2 launch` layout, started here), and under load
(probe tasks arriving while 30 other tasks' generations run). Real rclpy + Fast DDS on
loopback, the sim engine, simulated robots (1000x faster than real time).

Every node marks the hops it sees (`llm_planner/ros/hops.py`); the table separates the
middleware's transport hops from time that is not the middleware's: waiting for the engine's
current iteration to end, the planner's own generation, and a goal waiting at a busy robot.

Beside each scenario, in another ROS domain (`--floor-domain`, default this one + 1), a bare
rclpy action client and server (benchmarks/rclpy_floor.py, laid out as the scenario: in one
process, or the server in its own) exchange a goal every 50 ms while the probes run: what the
same action costs on this machine under the same load, with nothing of llm_planner around it.

Usage: . scripts/env.sh && python benchmarks/ros_overhead.py [--tasks 200] [--robot-links threads|process]
[--robots-per-process N] [--no-floor] [--json out/ros_overhead.json]"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import yaml

from llm_planner.ros.hops import ENV, read_hops
from llm_planner.ros.task_client import TaskClient
from llm_planner.settings.config import load_planner_config
from llm_planner.settings.fleet import RobotConfig
from llm_planner.testing.bench_result import write_bench_result
from llm_planner.testing.ros_fleet import instruction, start_fleet
from llm_planner_interfaces.msg import TaskStatus

ROOT = Path(__file__).resolve().parent.parent

# (name, from hop, to hop, middleware transport?)
SPANS = [
    ("task topic", "published", "received", True),
    ("wait for engine iteration", "received", "enqueued", False),
    ("planner (generation)", "enqueued", "decided", False),
    ("planner -> goal sent", "decided", "sent", True),
    ("goal request", "sent", "accepted", True),
    ("  of it: to server's take", "sent", "taken", True),  # DDS, the server's wake and turn
    ("  of it: rclpy accepts", "taken", "accepted", True),  # goal handle, response, status
    ("goal response", "accepted", "acknowledged", True),
    ("queued at robot", "accepted", "started", False),
    ("feedback", "started", "reported", True),
    ("result", "ended", "result", True),
]
PROBE_TRACE = 7  # an urgent alert: a short drone plan
LOAD_TRACE = 9  # a long arm plan: many tokens to generate
LOAD_GENERATIONS = 30
GAP_S = 0.05  # between probe tasks


@dataclass
class Scenario:
    layout: str  # "one process" | "processes"
    robots: int
    load: bool
    robot_links: str  # the planner parameter robot_links
    robots_per_process: int | None = None  # processes layout; None: as few processes as discovery allows
    floor_domain: int | None = None  # the bare rclpy pair's ROS domain; None: no pair

    @property
    def name(self) -> str:
        robots = f"{self.robots} robot{'s' if self.robots > 1 else ''}"
        return f"{self.layout}, {robots}{', under load' if self.load else ''}"

    def fleet(self) -> list[RobotConfig]:
        probes = [RobotConfig(id=f"r{i:02d}", type="tello", options={"time_scale": 0.001, "seed": i})
                  for i in range(self.robots)]
        loaders = [RobotConfig(id=f"load{i:02d}", type="fltrnn_arm", options={"time_scale": 0.001, "seed": i})
                   for i in range(LOAD_GENERATIONS if self.load else 0)]
        return probes + loaders


def start_floor(scenario: Scenario, n_goals: int, out: Path) -> subprocess.Popen:
    """The bare rclpy pair, in its own domain, started and ready to send (rclpy_floor.py)."""
    command = [sys.executable, str(Path(__file__).with_name("rclpy_floor.py")), "--goals", str(n_goals),
               "--json", str(out), "--announce"] + (["--processes"] if scenario.layout == "processes" else [])
    floor = subprocess.Popen(command, env={**os.environ, "ROS_DOMAIN_ID": str(scenario.floor_domain)},
                             stdout=subprocess.PIPE, text=True)
    assert floor.stdout is not None
    line = floor.stdout.readline().strip()
    if line != "sending":
        floor.kill()
        raise AssertionError(f"the bare rclpy pair did not start: {line!r}")
    return floor


def drive(client: TaskClient, scenario: Scenario, n_tasks: int) -> dict:
    """Warm up every robot once, then publish the probe tasks one every GAP_S (and, under
    load, keep LOAD_GENERATIONS long tasks in flight), the bare rclpy pair, if any, sending
    its goals meanwhile. Returns the probe ids (and the pair's hops)."""
    robots = scenario.fleet()
    started = time.monotonic()
    cold = list(robots)
    for attempt in range(100):  # until every robot has run a task: discovery can take a while
        warm = {f"warm{attempt}-{r.id}": r for r in cold}
        for task_id, r in warm.items():
            client.publish(task_id, r.id, instruction(LOAD_TRACE if r.type == "fltrnn_arm" else PROBE_TRACE))
        assert client.wait_terminal(list(warm), timeout=600), "warm-up tasks did not end"
        cold = [r for task_id, r in warm.items() if client.ended[task_id].state != TaskStatus.SUCCEEDED]
        if not cold or time.monotonic() - started > 600:
            break
        time.sleep(2.0)
    assert not cold, "robots never ran a task: " + "; ".join(
        f"{r.id}: {client.ended[task_id].message}" for task_id, r in warm.items() if r in cold)
    print(f"  warm-up: a task on each of {len(robots)} robots in {time.monotonic() - started:.0f} s", flush=True)
    loaders = [r.id for r in robots if r.type == "fltrnn_arm"]
    in_flight: dict[str, str] = {}  # robot -> its load task
    load_ids = iter(range(10**9))
    in_flight_counts = []

    def top_up() -> None:
        for robot_id in loaders:
            task_id = in_flight.get(robot_id)
            if task_id is None or client.terminal(task_id) is not None:
                in_flight[robot_id] = f"load-{next(load_ids)}"
                client.publish(in_flight[robot_id], robot_id, instruction(LOAD_TRACE))

    ids = []
    top_up()
    time.sleep(1.0 if loaders else 0.0)  # let the load's generations start
    floor_out = Path(tempfile.mkdtemp(prefix="floor-")) / "floor.json"
    floor = start_floor(scenario, n_tasks, floor_out) if scenario.floor_domain is not None else None
    for k in range(n_tasks):
        top_up()
        in_flight_counts.append(sum(client.terminal(t) is None for t in in_flight.values()))
        task_id = f"probe-{k}"
        ids.append(task_id)
        client.publish(task_id, f"r{k % scenario.robots:02d}", instruction(PROBE_TRACE), urgency=1)
        time.sleep(GAP_S)
    floor_ms = {}
    if floor is not None:
        try:
            assert floor.wait(timeout=120) == 0, "the bare rclpy pair failed"
        finally:
            floor.kill()  # if it has not ended (no-op otherwise)
        floor_ms = {hop: np.array(ms) for hop, ms in json.loads(floor_out.read_text()).items()}
    assert client.wait_terminal(ids + list(in_flight.values()), timeout=300), "probe tasks did not end"
    failed = [t for t in ids if client.ended[t].state != TaskStatus.SUCCEEDED]
    return {"probes": ids, "failed": failed, "floor_ms": floor_ms,
            "load_in_flight_mean": float(np.mean(in_flight_counts)) if loaders else 0.0}


def run_in_process(scenario: Scenario, n_tasks: int, hops_dir: Path) -> dict:
    running = start_fleet(scenario.fleet(), robot_links=scenario.robot_links)
    try:
        return drive(running.client, scenario, n_tasks)
    finally:
        running.stop()


MAX_PROCESSES = 32  # what Fast DDS discovers on one host under LOCALHOST discovery (fleet_main.node_specs)
MAX_DOMAIN_ID = 232  # the largest ROS domain id Fast DDS's port mapping allows


def run_processes(scenario: Scenario, n_tasks: int, hops_dir: Path) -> dict:
    """The processes `ros2 launch llm_planner fleet.launch.py` starts (fleet_main.node_specs):
    the planner node, and the robot servers one per process, or as few per process as keep
    the count within what LOCALHOST discovery finds."""
    import rclpy

    from llm_planner.ros.fleet_main import node_specs
    from llm_planner.ros.spin import spin_node

    work = Path(tempfile.mkdtemp(prefix="ros_overhead-"))
    fleet_file = work / "fleet.yaml"
    robots = scenario.fleet()
    fleet_file.write_text(yaml.safe_dump({"robot_timeout_s": 10.0, "robots": [r.model_dump() for r in robots]}))
    params_file = work / "params.yaml"
    params_file.write_text(yaml.safe_dump({"llm_planner": {"ros__parameters": {"robot_links": scenario.robot_links}}}))
    # The planner, this benchmark's client and the links process, if any, are more.
    others = 2 + (scenario.robot_links == "process")
    per_process = scenario.robots_per_process or -(-len(robots) // (MAX_PROCESSES - others))
    env = {**os.environ, ENV: str(hops_dir), "PYTHONFAULTHANDLER": "1"}
    specs = node_specs(None, str(fleet_file), robots_per_process=per_process, params_file=str(params_file))
    procs = [subprocess.Popen(spec.command(), env=env, stdout=subprocess.DEVNULL,
                              stderr=(work / f"process{i}.log").open("w"))
             for i, spec in enumerate(specs)]
    print(f"  {len(robots)} robots in {len(specs) - 1} processes ({per_process} per process), planner in one",
          flush=True)
    if not rclpy.ok():
        rclpy.init()
    client = TaskClient()
    spinning = spin_node(client)
    try:
        started = time.monotonic()
        assert client.wait_for_planner(600), f"planner did not subscribe (logs: {work})"
        print(f"  {len(procs)} processes up and the planner subscribed in {time.monotonic() - started:.0f} s",
              flush=True)
        return drive(client, scenario, n_tasks)
    finally:
        spinning.shutdown()
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.send_signal(signal.SIGABRT)  # PYTHONFAULTHANDLER: every thread's stack to its log
                p.wait(timeout=10)
                print(f"  process {p.args!r} did not stop on SIGTERM (stacks in {work})", file=sys.stderr)


def spans(hops: dict, probes: list[str]) -> dict[str, np.ndarray]:
    """Milliseconds per span over the probe tasks (task-level spans: their first segment;
    segment-level spans: every segment)."""
    out: dict[str, list[float]] = {name: [] for name, *_ in SPANS}
    out["overhead to first goal"] = []
    probe_set = set(probes)
    for (task_id, index), marks in hops.items():
        if task_id not in probe_set:
            continue
        for name, a, b, _ in SPANS:
            if a in marks and b in marks:
                out[name].append((marks[b] - marks[a]) * 1000)
        if index == 0 and all(h in marks for h in ("published", "received", "decided", "accepted")):
            total = marks["accepted"] - marks["published"]
            out["overhead to first goal"].append((total - (marks["decided"] - marks["received"])) * 1000)
    return {k: np.array(v) for k, v in out.items()}


def row(values: np.ndarray) -> dict:
    if len(values) == 0:
        return {"n": 0}
    return {"n": int(len(values)), "p50_ms": float(np.percentile(values, 50)),
            "p99_ms": float(np.percentile(values, 99)), "max_ms": float(values.max())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=200, help="probe tasks per scenario")
    parser.add_argument("--layouts", default="one process,processes")
    parser.add_argument("--robots", default="1,50")
    parser.add_argument("--no-load", action="store_true", help="skip the under-load scenarios")
    parser.add_argument("--json", help="result file (default out/bench/ros_overhead.json)")
    parser.add_argument("--robot-links", choices=["process", "threads"],
                        help="the planner parameter robot_links (default: config/planner.yaml's): the robot links in "
                             "a process of their own, or as threads of the planner's process")
    parser.add_argument("--switch-interval", type=float,
                        help="sys.setswitchinterval for this process (the planner's, in the one-process layout)")
    parser.add_argument("--robots-per-process", type=int,
                        help="processes layout: robot servers per process (default: as few processes as "
                             f"Fast DDS discovers on one host, {MAX_PROCESSES})")
    parser.add_argument("--floor-domain", type=int,
                        help="the ROS domain of the bare rclpy pair beside each scenario (default: this one + 1, "
                             f"or - 1 at {MAX_DOMAIN_ID})")
    parser.add_argument("--no-floor", action="store_true", help="no bare rclpy pair beside the scenarios")
    args = parser.parse_args()
    args.robot_links = args.robot_links or load_planner_config().robot_links
    floor_domain = None
    if not args.no_floor:
        own = int(os.environ.get("ROS_DOMAIN_ID", "0"))
        floor_domain = args.floor_domain
        if floor_domain is None:
            floor_domain = own + 1 if own < MAX_DOMAIN_ID else own - 1
        if floor_domain == own or not 0 <= floor_domain <= MAX_DOMAIN_ID:
            parser.error(f"--floor-domain must be another ROS domain than this one ({own}), 0 to {MAX_DOMAIN_ID}")
    if args.switch_interval:
        sys.setswitchinterval(args.switch_interval)
    os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    scenarios = []
    for layout in args.layouts.split(","):
        scenarios += [Scenario(layout, int(n), False, args.robot_links, args.robots_per_process, floor_domain)
                      for n in args.robots.split(",")]
        if not args.no_load:
            scenarios.append(Scenario(layout, max(int(n) for n in args.robots.split(",")), True, args.robot_links,
                                      args.robots_per_process, floor_domain))
    results = {}
    for scenario in scenarios:
        hops_dir = Path(tempfile.mkdtemp(prefix="hops-"))
        os.environ[ENV] = str(hops_dir)  # in-process nodes read it when they are made
        started = time.monotonic()
        runner = run_in_process if scenario.layout == "one process" else run_processes
        info = runner(scenario, args.tasks, hops_dir)
        os.environ.pop(ENV)
        measured = spans(read_hops(hops_dir), info["probes"])
        results[scenario.name] = {"robots": scenario.robots, "layout": scenario.layout, "load": scenario.load,
                                  "robot_links": scenario.robot_links,
                                  "failed": info["failed"], "load_in_flight_mean": info["load_in_flight_mean"],
                                  "spans": {k: row(v) for k, v in measured.items()},
                                  "bare_rclpy": {k: row(v) for k, v in info["floor_ms"].items()}}
        print(f"\n{scenario.name}: {len(info['probes'])} probe tasks, {len(info['failed'])} failed"
              + (f", {info['load_in_flight_mean']:.1f} load tasks in flight on average" if scenario.load else "")
              + f" ({time.monotonic() - started:.0f} s)")
        print(f"  {'span':<28} {'kind':<10} {'n':>5} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8}")
        kinds = {name: ("transport" if transport else "not ROS") for name, _, _, transport in SPANS}
        kinds["overhead to first goal"] = "old figure"
        for name, values in measured.items():
            r = row(values)
            if r["n"]:
                print(f"  {name:<28} {kinds[name]:<10} {r['n']:>5} {r['p50_ms']:>8.2f} {r['p99_ms']:>8.2f} "
                      f"{r['max_ms']:>8.2f}", flush=True)
        for name, values in info["floor_ms"].items():
            r = row(values)
            print(f"  {'bare rclpy: ' + name:<28} {'floor':<10} {r['n']:>5} {r['p50_ms']:>8.2f} {r['p99_ms']:>8.2f} "
                  f"{r['max_ms']:>8.2f}", flush=True)
    write_bench_result(args.json, "ros_overhead", results,
                       notes="per scenario, each hop's milliseconds (spans) and the bare rclpy pair's beside it")


if __name__ == "__main__":
    main()
