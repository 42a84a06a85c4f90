"""Spinning an executor on a background thread."""

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


def spin_node(node) -> tuple[SingleThreadedExecutor, threading.Thread]:
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    return executor, spin_in_thread(executor, f"{node.get_name()}-executor")
