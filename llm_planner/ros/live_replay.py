"""The lifecycle of a live LRTrace run over ROS 2: rclpy, the fleet (when started here), the
task client, the recorder, the replay, and their shutdown in order (`lrtrace replay` and
`lrtrace record`)."""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from llm_planner.engine import Engine
from llm_planner.lrtrace.formats import TraceSet, Workload, save
from llm_planner.lrtrace.jobs import agent_types
from llm_planner.settings.config import PlannerConfig

PLANNER_WAIT_S = 20.0
RECORDER_MATCH_S = 5.0


@dataclass
class LiveRun:
    complete: bool  # every task ended within the grace time
    messages: int  # recorded to the MCAP file
    first_actions: dict | None  # urgent first action under load vs idle (with the idle check)


@contextmanager
def _rclpy() -> Iterator[None]:
    """rclpy for the run, unless the caller's process runs it already."""
    import rclpy

    owns = not rclpy.ok()
    if owns:
        rclpy.init()
    try:
        yield
    finally:
        if owns:
            rclpy.try_shutdown()


def _until_quiet(recorder, quiet_s: float = 0.2, limit_s: float = 2.0) -> None:
    """Until the recorder has written nothing for `quiet_s`: the last statuses, which reached
    the task client, reach its own subscriptions too."""
    deadline = time.monotonic() + limit_s
    count = -1
    while recorder.count != count and time.monotonic() < deadline:
        count = recorder.count
        time.sleep(quiet_s)


def replay_live(
    config: PlannerConfig,
    name: str,
    workload: Workload,
    traces: TraceSet,
    record_path: Path,
    *,
    start_fleet: bool,
    seed: int,
    speed: float,
    grace_s: float,
    idle_check: bool,
    fail_rates: dict[str, float] | None = None,
    engine: Engine | None = None,
    say: Callable[[str], None] = print,
    tick: Callable[[int, int], None] | None = None,
) -> LiveRun:
    """One live replay under `config.policy`, recorded to `record_path`. With `start_fleet`,
    the planner and simulated robots for the workload's agents run in this process, failing
    calls at `fail_rates` (catalog/faults.py)."""
    from llm_planner.domain.names import TASKS_TOPIC
    from llm_planner.ros.replay import Recorder, idle_first_actions, replay
    from llm_planner.ros.spin import spin_node
    from llm_planner.ros.task_client import TaskClient
    from llm_planner.settings.fleet import fleet_for_agents

    with _rclpy():
        fleet = client = recorder = spinning = None
        try:
            if start_fleet:
                from llm_planner.ros.fleet_main import Fleet

                traces_file = Path("out") / f"{name}-traces.yaml"
                traces_file.parent.mkdir(parents=True, exist_ok=True)
                save(traces, traces_file)
                fleet_config = fleet_for_agents(
                    agent_types(workload, traces), seed=seed, **({"fail_rate": fail_rates} if fail_rates else {})
                )
                fleet = Fleet(config, fleet_config, traces=[str(traces_file)], engine=engine).start()
                if fleet.unreachable:
                    raise RuntimeError(f"robots did not come up: {fleet.unreachable}")
                assert fleet.planner_node is not None  # a fleet with its planner
                view = fleet.planner_node.view
                if view is not None and view.url:
                    say(
                        f"{config.policy}: live view at {view.url} (Foxglove: Open connection, Foxglove WebSocket; "
                        "layout config/foxglove/llm_planner.json)"
                    )
            client = TaskClient("lrtrace_replay")
            spinning = spin_node(client)
            if not client.wait_for_planner(PLANNER_WAIT_S):
                raise RuntimeError(f"no planner is subscribed to {TASKS_TOPIC} (start one, or pass --start-fleet)")
            idle = {}
            if idle_check:  # before recording: these tasks are not part of the workload's figures
                say(f"{config.policy}: urgent tasks alone on the idle planner ...")
                idle = idle_first_actions(client, workload, traces, config)
            recorder = Recorder(client, record_path)
            client.wait_for_subscribers(2, RECORDER_MATCH_S)  # the planner's and the recorder's: none is lost
            complete = replay(client, workload, traces, config, speed, tick, grace_s=grace_s)
            _until_quiet(recorder)
            first_actions = urgent_first_actions(client, workload, idle)
        finally:
            if recorder is not None:
                recorder.close()
            if spinning is not None:
                spinning.shutdown()
            elif client is not None:
                client.destroy_node()
            if fleet is not None:
                fleet.shutdown()
    return LiveRun(complete, recorder.count, first_actions)


def urgent_first_actions(client, workload: Workload, idle: dict[int, float]) -> dict | None:
    """Urgent first action (publish -> first segment sent) under load vs the same urgent
    tasks alone on the idle planner, p50 of each and their ratio."""
    from llm_planner.ros.replay import first_action_s

    measured = [first_action_s(client, j.task_id) for j in workload.jobs if j.trace_id in idle]
    loaded = [x for x in measured if x is not None]
    if not idle or not loaded:
        return None
    idle_p50 = statistics.median(idle[j.trace_id] for j in workload.jobs if j.trace_id in idle)
    load_p50 = statistics.median(loaded)
    return {"idle_p50_s": round(idle_p50, 4), "load_p50_s": round(load_p50, 4), "ratio": round(load_p50 / idle_p50, 3)}


def record(output: str | Path, duration_s: float | None) -> int:
    """Record the planner's topics until `duration_s` has passed or Ctrl-C; the messages written."""
    import rclpy

    from llm_planner.ros.replay import Recorder
    from llm_planner.ros.spin import spin_node
    from llm_planner.ros.task_client import TaskClient

    rclpy.init()
    node = TaskClient("lrtrace_recorder")
    recorder = Recorder(node, output)
    spinning = spin_node(node)
    deadline = time.monotonic() + duration_s if duration_s else math.inf
    try:
        # rclpy's SIGINT handler shuts the context down: that ends the recording too
        while rclpy.ok() and time.monotonic() < deadline:
            time.sleep(0.2)
    except KeyboardInterrupt:
        pass
    finally:
        recorder.close()
        spinning.shutdown()
        rclpy.try_shutdown()
    return recorder.count
