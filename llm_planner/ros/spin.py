"""Spinning nodes on background threads: each node in an executor of its own.

rclpy's executors rebuild their wait set in Python from every entity of every node they
hold, on every wake. With fifty robot servers and the planner's fifty action clients in one
executor that took 5-40 ms per message on two cores (benchmarks/ros_overhead.py,
docs/performance/ros-path.md); a node's own executor waits on that node's entities only. No callback
of the package blocks (robots move on their own threads), so one thread per node is enough,
and the executor is `NodeExecutor` (ros/rclpy_compat.py): one turn per message, half the Python
of rclpy's."""

from __future__ import annotations

import logging
import threading

from rclpy.executors import ExternalShutdownException

from llm_planner.ros.rclpy_compat import NodeExecutor

log = logging.getLogger(__name__)


class _Spin:
    """One executor spinning on its own daemon thread until `stop()`. The loop is this one,
    not `executor.spin()`: rclpy 9.1's `Executor.shutdown()` destroys the executor's guard
    condition without waiting for a spin in progress (its wait is skipped once the flag is
    set), so a busy executor thread then failed with "'NoneType' object has no attribute
    'trigger'". Stopping the loop and joining the thread before the shutdown avoids that."""

    def __init__(self, node, name: str, make_executor=NodeExecutor) -> None:
        self.executor = make_executor(node)
        self._stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True, name=name)
        self.thread.start()

    def _run(self) -> None:
        while not self._stopping.is_set():
            try:
                self.executor.spin_once()  # returns after one wake: work, or stop()'s
            except ExternalShutdownException:  # the context was shut down from outside (rclpy's Ctrl-C handler)
                return
            except Exception:  # a failed callback is raised here; the node must go on serving
                if not self.executor.context.ok():
                    return
                log.exception("a callback of %s failed", self.thread.name)

    def stop(self) -> None:
        self._stopping.set()
        self.executor.wake()  # ends the turn's wait


class Spinning:
    """Nodes spinning, each in its own executor and thread, until `shutdown()`: which stops
    the nodes' own work first (`stop()` where a node has one), then every executor's loop
    (joining its thread), shuts the executors down and destroys the nodes, so no callback
    runs on a destroyed node. A node's `link_nodes` (the planner's robot links) spin beside
    it and go with it."""

    def __init__(self, nodes=(), make_executor=NodeExecutor) -> None:
        """`make_executor(node)`: the executor each node spins in (a benchmark may compare rclpy's)."""
        self._make_executor = make_executor
        self._spun: dict[object, list[_Spin]] = {}
        for node in nodes:
            self.add(node)

    def add(self, node) -> None:
        self._spun[node] = [
            _Spin(each, f"{each.get_name()}-executor", self._make_executor)
            for each in [node, *getattr(node, "link_nodes", [])]
        ]

    def remove(self, node) -> None:
        self._close([node])

    def shutdown(self) -> None:
        self._close(list(self._spun))

    def _close(self, nodes: list) -> None:
        for node in nodes:
            if hasattr(node, "stop"):
                node.stop()
        spins = [spin for node in nodes for spin in self._spun.pop(node)]
        for spin in spins:
            spin.stop()
        for spin in spins:
            spin.thread.join(timeout=5)
            spin.executor.shutdown(timeout_sec=2.0)
        for node in nodes:
            node.destroy_node()  # a node destroys its own link nodes


def spin_node(node) -> Spinning:
    return Spinning([node])
