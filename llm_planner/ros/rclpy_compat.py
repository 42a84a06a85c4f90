"""rclpy: the version this package was written for, checked when the ROS layer is imported.

The ROS layer uses private rclpy API in a few places, each pinned by tests: the executor's
turn (ros/executor.py: `Executor._tasks`, `_tasks_lock`, `_take_*`, `_guard`, `_sigint_gc`),
thread-safe goal sending (ros/robot_client.py `send_goal`: `ActionClient._lock`,
`_client_handle`, `_pending_goal_requests`, ...), the action server's result path and
`goal_id._uuid` (ros/robot_server.py), and `Node._parameter_overrides` (ros/parameters.py).
A different rclpy is reported with the tested version (settings/versions.py)."""

from __future__ import annotations

import importlib.metadata
from pathlib import Path

from llm_planner.settings.versions import report_untested_version

# The ros-rclpy wheel of ROS 2 Kilted that requirements-ros.txt pins and the tests ran on.
RCLPY_TESTED = "9.1.2"
RELIES_ON = "private rclpy API (executor turn, goal sending, action results, parameter overrides)"


def installed_rclpy_version() -> str | None:
    """The PyPI wheel's version, else (a ROS 2 install from source or packages) rclpy's package.xml."""
    try:
        return importlib.metadata.version("ros-rclpy")
    except importlib.metadata.PackageNotFoundError:
        pass
    try:
        from ament_index_python.packages import PackageNotFoundError, get_package_share_directory
    except ImportError:
        return None
    try:
        manifest = Path(get_package_share_directory("rclpy")) / "package.xml"
    except PackageNotFoundError:
        return None
    import xml.etree.ElementTree as ElementTree

    return ElementTree.parse(manifest).getroot().findtext("version")


def check_rclpy_version() -> str | None:
    return report_untested_version("ros-rclpy", installed_rclpy_version(), RCLPY_TESTED, RELIES_ON)
