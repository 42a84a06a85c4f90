"""The floor under benchmarks/ros_overhead.py: the same action (ExecuteSegment) between a bare
rclpy action client and a bare rclpy action server that accepts every goal and succeeds at
once, each node spinning in an executor on its own thread (as llm_planner's nodes do: NodeExecutor,
ros/rclpy_compat.py, or with `--executor rclpy` rclpy's SingleThreadedExecutor), nothing else
running. Goals go one at a time, one every 50 ms, like the probes there.
The client sends goals with the planner's links' `send_goal` (one future per goal, none left
behind, unlike rclpy 9.1's `send_goal_async`), and the server lists an ended goal as long as a
robot's does.

Hops, p50 / p99 ms: goal request (sent → server's accepted callback), goal response (→ the
client's response callback), result (server's end → the client's result callback). With
`--processes` the server runs in a process of its own.

benchmarks/ros_overhead.py runs it beside each of its scenarios (`--json`, `--announce`).

Usage: . scripts/env.sh && python benchmarks/rclpy_floor.py [--goals 200] [--processes] [--executor rclpy]
[--json hops.json]"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time

import numpy as np
import rclpy
from rclpy.action import ActionClient, ActionServer, GoalResponse
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node

from llm_planner.ros.qos import ACTION_CLIENT, ACTION_SERVER
from llm_planner.ros.rclpy_compat import NodeExecutor, send_goal
from llm_planner.ros.robot_server import GOAL_LISTED_S
from llm_planner.ros.spin import Spinning
from llm_planner_interfaces.action import ExecuteSegment

ACTION = "/floor/execute_segment"
GAP_S = 0.05


class FloorServer(Node):
    """Accepts every goal and succeeds at once; writes when it accepted and ended each goal."""

    def __init__(self) -> None:
        super().__init__("floor_server", start_parameter_services=False)
        self.accepted: dict[int, float] = {}
        self.ended: dict[int, float] = {}
        self._server = ActionServer(self, ExecuteSegment, ACTION, execute_callback=self._execute,
                                    goal_callback=lambda goal: GoalResponse.ACCEPT,
                                    handle_accepted_callback=self._on_accepted,
                                    result_timeout=GOAL_LISTED_S,  # type: ignore[arg-type]  # float seconds in C
                                    **ACTION_SERVER)

    def _on_accepted(self, goal_handle) -> None:
        self.accepted[goal_handle.request.segment_index] = time.monotonic()
        goal_handle.execute()

    def _execute(self, goal_handle) -> ExecuteSegment.Result:
        goal_handle.succeed()
        self.ended[goal_handle.request.segment_index] = time.monotonic()
        return ExecuteSegment.Result(success=True)


class FloorClient(Node):
    def __init__(self) -> None:
        super().__init__("floor_client", start_parameter_services=False)
        self.client: ActionClient = ActionClient(self, ExecuteSegment, ACTION, **ACTION_CLIENT)
        self.sent: dict[int, float] = {}
        self.responded: dict[int, float] = {}
        self.resulted: dict[int, float] = {}
        self.done = threading.Event()
        self.count = 0

    def send(self, index: int) -> None:
        goal = ExecuteSegment.Goal(task_id="floor", segment_index=index, text="tc(30);", calls=["tc(30)"], last=True)
        self.sent[index] = time.monotonic()
        send_goal(self.client, goal, lambda f: self._on_response(index, f))

    def _on_response(self, index: int, future) -> None:
        self.responded[index] = time.monotonic()
        future.result().get_result_async().add_done_callback(lambda f: self._on_result(index))

    def _on_result(self, index: int) -> None:
        self.resulted[index] = time.monotonic()
        if len(self.resulted) == self.count:
            self.done.set()


def executor_for(kind: str):
    """What Spinning makes for each node: llm_planner's NodeExecutor, or rclpy's own."""
    if kind != "rclpy":
        return NodeExecutor

    def rclpy_executor(node) -> SingleThreadedExecutor:
        executor = SingleThreadedExecutor()
        executor.add_node(node)
        return executor

    return rclpy_executor


def serve(stamps_path: str, executor: str) -> None:
    """The server's process: serve until stdin closes, then write its stamps."""
    rclpy.init()
    server = FloorServer()
    spinning = Spinning([server], executor_for(executor))
    print("ready", flush=True)
    sys.stdin.read()
    with open(stamps_path, "w") as f:
        json.dump({"accepted": server.accepted, "ended": server.ended}, f)
    spinning.shutdown()
    rclpy.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--goals", type=int, default=200)
    parser.add_argument("--processes", action="store_true", help="the server in a process of its own")
    parser.add_argument("--executor", choices=["node", "rclpy"], default="node",
                        help="node: llm_planner's NodeExecutor (default); rclpy: its SingleThreadedExecutor")
    parser.add_argument("--json", help="write each hop's milliseconds here")
    parser.add_argument("--announce", action="store_true", help="print 'sending' once the first goal can go")
    parser.add_argument("--serve", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        return serve(args.serve, args.executor)
    rclpy.init()
    client = FloorClient()
    nodes: list[Node] = [client]
    stamps = f"/tmp/rclpy_floor_{os.getpid()}.json"
    if args.processes:
        proc = subprocess.Popen([sys.executable, __file__, "--serve", stamps, "--executor", args.executor],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready"
    else:
        server = FloorServer()
        nodes.append(server)
    spinning = Spinning(nodes, executor_for(args.executor))
    assert client.client.wait_for_server(timeout_sec=30), "no server"
    warm = 20
    client.count = warm + args.goals
    if args.announce:
        print("sending", flush=True)
    for i in range(client.count):
        client.send(i)
        time.sleep(GAP_S)
    assert client.done.wait(60), f"{len(client.resulted)} of {client.count} results"
    if args.processes:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(30)
        with open(stamps) as f:
            theirs = json.load(f)
        os.unlink(stamps)
        accepted = {int(k): v for k, v in theirs["accepted"].items()}
        ended = {int(k): v for k, v in theirs["ended"].items()}
    else:
        accepted, ended = server.accepted, server.ended
    spinning.shutdown()
    rclpy.shutdown()
    measured = range(warm, client.count)  # the first goals meet DDS discovery still settling
    layout = "processes" if args.processes else "one process"
    print(f"bare rclpy action, {layout}, {args.executor} executor: {args.goals} goals, "
          f"one every {GAP_S * 1000:.0f} ms")
    print(f"  {'hop':<14} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8}")
    hops = {}
    for name, start, end in (("goal request", client.sent, accepted), ("goal response", accepted, client.responded),
                             ("result", ended, client.resulted)):
        ms = np.array([(end[i] - start[i]) * 1000 for i in measured])
        hops[name] = ms.tolist()
        print(f"  {name:<14} {np.percentile(ms, 50):8.2f} {np.percentile(ms, 99):8.2f} {ms.max():8.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(hops, f)


if __name__ == "__main__":
    main()
