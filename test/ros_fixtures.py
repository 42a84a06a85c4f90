"""Real rclpy fixtures for the tests: a module that imports this one is skipped without a built
ROS 2 workspace, except under `make test`, where a missing workspace is an error."""

import contextlib
import os
import signal
import subprocess
import time

import pytest

if os.environ.get("LLM_PLANNER_REQUIRE_ROS"):
    import rclpy

    import llm_planner_interfaces  # noqa: F401
else:
    rclpy = pytest.importorskip("rclpy", reason="ROS 2 workspace not sourced (run tests via `make test`)")
    pytest.importorskip("llm_planner_interfaces", reason="interfaces not built (run `make setup`)")

from llm_planner.testing.ros_fleet import TRACES, Running, instruction, start_fleet  # noqa: E402

__all__ = ["TRACES", "Running", "instruction", "launched", "rclpy", "start_fleet", "stop_launched", "wait_until"]


def wait_until(predicate, timeout: float) -> bool:
    """Whether `predicate()` held within `timeout` seconds (asked every 50 ms)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return bool(predicate())


def launched(command: list[str]) -> subprocess.Popen:
    """A node's process as `ros2 launch` starts it: a process group of its own (the process
    and what it starts), its output kept; SIGABRT makes it print every thread's stack."""
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONFAULTHANDLER": "1"}, start_new_session=True)


def _signal_group(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):  # the group may have ended
        os.killpg(pid, sig)


def _executable(p: subprocess.Popen) -> str:
    return str(p.args[0] if isinstance(p.args, (list, tuple)) else p.args)


def stop_launched(procs: list[subprocess.Popen], sig: int = signal.SIGTERM,
                  timeout_s: float = 45.0) -> list[tuple[str, str, str, int | str]]:
    """Send `sig` to each process's group and collect (executable, stdout, stderr, exit
    status). A process still there after `timeout_s` is aborted (its stacks end its stderr),
    then killed with its group, and reported with status "hung, killed": a node left running
    would take the next tests' tasks."""
    for p in procs:
        _signal_group(p.pid, sig)
    outcomes: list[tuple[str, str, str, int | str]] = []
    for p in procs:
        try:
            out, err = p.communicate(timeout=timeout_s)
            outcomes.append((_executable(p), out, err, p.returncode))
            continue
        except subprocess.TimeoutExpired:
            os.kill(p.pid, signal.SIGABRT)
        try:
            out, err = p.communicate(timeout=10)
        except subprocess.TimeoutExpired:  # no stacks either
            _signal_group(p.pid, signal.SIGKILL)
            out, err = p.communicate()
        _signal_group(p.pid, signal.SIGKILL)  # what it started
        outcomes.append((_executable(p), out, err, "hung, killed"))
    return outcomes
