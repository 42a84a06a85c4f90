"""Clean shutdown: a fleet stopped in the middle of its work leaves no thread behind and
nothing on stderr (rclpy prints "The following exception was never retrieved" when a
callback runs on a node that is being destroyed); the launch layout's processes stop on
SIGTERM and SIGINT with exit status 0, and the planner's links process (robot_links:
process) with them; a burst of signals stops a node as one does, and a stop that hangs prints
every thread's stack and exits. Each case runs in a fresh interpreter, so what it prints at
exit is seen too."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from ros_fixtures import instruction, launched, stop_launched  # skips this module without a ROS 2 workspace

from llm_planner.ros.fleet_main import node_specs

pytestmark = pytest.mark.ros

TEST_DIR = Path(__file__).resolve().parent

IN_PROCESS = """
import sys, threading
sys.path.insert(0, {test_dir!r})
import rclpy
from ros_fixtures import instruction, start_fleet
from llm_planner.settings.fleet import RobotConfig

running = start_fleet([RobotConfig(id="drone1", type="tello", options={{"time_scale": 0.05}}),
                       RobotConfig(id="drone2", type="tello", options={{"time_scale": 1.0}})],
                      robot_links={robot_links!r})
links_process = getattr(running.fleet.planner_node.port, "_process", None)
c = running.client
c.publish("quick", "drone1", instruction(7), urgency=1)
c.publish("slow", "drone2", instruction(1))  # still flying when the fleet stops
assert c.wait_terminal(["quick"], timeout=60), "task did not end"
running.stop()
rclpy.shutdown()
print("left:", sorted(t.name for t in threading.enumerate() if t is not threading.main_thread()))
print("links process:", "none" if links_process is None else f"exit {{links_process.poll()}}")
"""


def _clean(stderr: str) -> None:
    for sign in ("never retrieved", "Traceback", "cannot use Destroyable", "robot links' process ended"):
        assert sign not in stderr, stderr[-3000:]


@pytest.mark.parametrize("robot_links", ["threads", "process"])
def test_fleet_stops_cleanly_in_one_process(robot_links):
    done = subprocess.run([sys.executable, "-c", IN_PROCESS.format(test_dir=str(TEST_DIR), robot_links=robot_links)],
                          capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "left: []" in done.stdout, done.stdout
    assert f"links process: {'none' if robot_links == 'threads' else 'exit 0'}" in done.stdout, done.stdout
    _clean(done.stderr)


def _children(pid: int) -> list[int]:
    return [int(c) for task in Path(f"/proc/{pid}/task").iterdir()
            for c in (task / "children").read_text().split()]


@pytest.mark.parametrize("sig,robot_links", [(signal.SIGTERM, "threads"), (signal.SIGINT, "threads"),
                                             (signal.SIGTERM, "process"), (signal.SIGINT, "process")])
def test_launch_processes_stop_on_signal(tmp_path, sig, robot_links):
    """The processes `ros2 launch llm_planner fleet.launch.py robots_per_process:=2` starts
    (planner node; two robot servers in one process), each stopped by a signal while a task
    runs; with `robot_links: process` the planner stops its links' process too, which is
    sent the same signal (as Ctrl-C or a service manager's SIGTERM reach a process group)
    and stays until the planner is done with it."""
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(yaml.safe_dump({"robots": [
        {"id": "drone1", "type": "tello", "options": {"time_scale": 1.0}},
        {"id": "drone2", "type": "tello", "options": {"time_scale": 1.0}}]}))
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump({"llm_planner": {"ros__parameters": {"robot_links": robot_links}}}))
    specs = node_specs(None, str(fleet), robots_per_process=2, params_file=str(params))
    procs = [launched(spec.command()) for spec in specs]
    links_process: list[int] = []
    import rclpy

    from llm_planner.ros.spin import spin_node
    from llm_planner.ros.task_client import TaskClient

    if not rclpy.ok():
        rclpy.init()
    client = TaskClient("shutdown_probe")
    spinning = spin_node(client)
    try:
        assert client.wait_for_planner(60)
        client.publish("busy", "drone1", instruction(1))
        deadline = time.monotonic() + 60
        while not client.segments_executing("busy") and time.monotonic() < deadline:
            time.sleep(0.1)
        assert client.segments_executing("busy"), "the task never reached its robot"
        links_process = _children(procs[-1].pid)  # the planner is the last spec
    finally:
        spinning.shutdown()
        outcomes = stop_launched(procs, sig)
    for command, _, stderr, code in outcomes:
        assert code == 0, f"{command}: exit status {code}: {stderr[-3000:]}"
        _clean(stderr)
    assert len(links_process) == (robot_links == "process")
    assert not any(Path(f"/proc/{pid}").exists() for pid in links_process), "the links' process outlived the planner"


SPUN_UNTIL_SIGNAL = """
import time
from rclpy.node import Node
from llm_planner.ros import fleet_main

class Stalling(Node):
    def stop(self):
        if {stall}:
            time.sleep(3600)

fleet_main.SHUTDOWN_LIMIT_S = 2.0
fleet_main._init_ros([])  # as the node commands: no rclpy signal handlers
print("spinning", flush=True)
fleet_main._spin_until_signal([Stalling("stalling")])
print("stopped", flush=True)
"""


def _catches_sigterm(pid: int) -> bool:
    caught = next(line for line in Path(f"/proc/{pid}/status").read_text().splitlines() if line.startswith("SigCgt:"))
    return bool(int(caught.split()[1], 16) >> (signal.SIGTERM - 1) & 1)


def _spun_until_signal(stall: bool) -> subprocess.Popen:
    """The process, once its SIGTERM handler is set (Python catches SIGINT from the start)."""
    proc = launched([sys.executable, "-c", SPUN_UNTIL_SIGNAL.format(stall=stall)])
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "spinning\n"
        deadline = time.monotonic() + 30
        while not _catches_sigterm(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert _catches_sigterm(proc.pid), "no SIGTERM handler"
    except BaseException:
        [(_, _, err, _)] = stop_launched([proc], signal.SIGKILL)  # a failed test leaves no node behind
        print(err[-3000:])
        raise
    return proc


def test_a_burst_of_signals_stops_a_node_once_and_cleanly():
    """Signals arriving while the handler runs (Ctrl-C held, a launch and a service manager
    both stopping it) still stop the node: the handler takes no lock."""
    proc = _spun_until_signal(stall=False)
    try:
        for _ in range(300):
            os.kill(proc.pid, signal.SIGTERM)
    finally:
        [(_, out, err, code)] = stop_launched([proc], signal.SIGINT)
    assert code == 0 and out == "stopped\n", err[-3000:]


def test_a_hung_stop_prints_every_stack_and_exits():
    proc = _spun_until_signal(stall=True)
    started = time.monotonic()
    [(_, out, err, code)] = stop_launched([proc], signal.SIGTERM)
    assert code == 1 and "stopped" not in out
    assert time.monotonic() - started < 15
    assert "in stop" in err and "in _spin_until_signal" in err, err[-3000:]  # the stalled call, and where from
