"""Spinning nodes on background threads: each node in an executor of its own.

rclpy's executors rebuild their wait set in Python from every entity of every node they
hold, on every wake. With fifty robot servers and the planner's fifty action clients in one
executor that took 5-40 ms per message on two cores (benchmarks/ros_overhead.py, README "ROS
path"); a node's own SingleThreadedExecutor waits on that node's entities only. No callback
of ours blocks (robots move on their own threads), so one thread per node is enough."""

from __future__ import annotations

import threading

from rclpy.executors import Executor, ExternalShutdownException, SingleThreadedExecutor


def spin_in_thread(executor: Executor, name: str = "ros-executor") -> threading.Thread:
    """Start `executor.spin()` on a daemon thread. A context shut down from outside (rclpy's
    own Ctrl-C handler) ends the spin quietly instead of with a traceback."""

    def run() -> None:
        try:
            executor.spin()
        except ExternalShutdownException:
            pass

    thread = threading.Thread(target=run, daemon=True, name=name)
    thread.start()
    return thread


class Spinning:
    """Nodes spinning, each in its own executor and thread, until `shutdown()`: which stops
    the nodes' own work first (`stop()` where a node has one), then every executor, then
    destroys the nodes and joins the threads, so no callback runs on a destroyed node. A
    node's `link_nodes` (the planner's robot links) spin beside it and go with it."""

    def __init__(self, nodes=()) -> None:
        self._spun: dict[object, list[tuple[SingleThreadedExecutor, threading.Thread]]] = {}
        for node in nodes:
            self.add(node)

    def add(self, node) -> None:
        self._spun[node] = []
        for each in [node, *getattr(node, "link_nodes", [])]:
            executor = SingleThreadedExecutor()
            executor.add_node(each)
            self._spun[node].append((executor, spin_in_thread(executor, f"{each.get_name()}-executor")))

    def remove(self, node) -> None:
        self._close([node])

    def shutdown(self) -> None:
        self._close(list(self._spun))

    def _close(self, nodes: list) -> None:
        for node in nodes:
            if hasattr(node, "stop"):
                node.stop()
        for node in nodes:
            for executor, _ in self._spun[node]:
                executor.shutdown(timeout_sec=2.0)
        for node in nodes:
            node.destroy_node()  # a node destroys its own link nodes
            for _, thread in self._spun.pop(node):
                thread.join(timeout=5)


def spin_node(node) -> Spinning:
    return Spinning([node])
