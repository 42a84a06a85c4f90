"""The colcon workspace as ROS 2 users use it: `source install/setup.bash` after activating the
virtual environment that holds the ROS 2 wheels (the underlay)."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.ros

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.skipif(not os.environ.get("LLM_PLANNER_REQUIRE_ROS") and not (ROOT / "install").is_dir(),
                    reason="no colcon workspace built (make setup builds it)")
@pytest.mark.parametrize("shell", ["bash", "zsh"])
def test_sourcing_the_workspace_setup_script_finds_the_interfaces_and_the_package(shell):
    script = ROOT / "install" / f"setup.{shell}"
    assert script.is_file(), f"colcon left no {script.name} (colcon-{shell} missing from the set-up?)"
    if shutil.which(shell) is None:
        pytest.skip(f"{shell} is not installed here")
    probe = ("from llm_planner_interfaces.msg import Task; from llm_planner.ros.fleet_main import node_specs; "
             "print(Task.__module__)")
    env = {"PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", "/tmp"),
           "ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST"}
    proc = subprocess.run([shell, "-c", f". {ROOT}/.venv/bin/activate && . {script} && python -c '{probe}'"],
                          cwd="/", env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "llm_planner_interfaces.msg" in proc.stdout
