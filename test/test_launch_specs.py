"""The logic the launch files wrap (launch_ros is not installable here)."""

import ast
from pathlib import Path

import pytest

from llm_planner.ros.fleet_main import node_specs
from llm_planner.settings.model_file import ConfigError

ROOT = Path(__file__).resolve().parent.parent


def test_fleet_node_specs():
    specs = node_specs(None, None, "edf")
    assert [s.executable for s in specs] == ["llm-planner-robot"] * 3 + ["llm-planner-node"]
    assert [s.name for s in specs] == ["drone1_server", "drone2_server", "arm1_server", "llm_planner"]
    assert specs[0].arguments == ["--robot", "drone1"] and specs[-1].arguments == ["--ros-args", "-p", "policy:=edf"]
    # the policy argument after the params file: later ROS arguments win
    assert node_specs(None, None, "edf", params_file="p.yaml")[-1].arguments == [
        "--ros-args", "--params-file", "p.yaml", "-p", "policy:=edf"]
    # what ros2 launch runs: launch_ros names the node
    assert specs[0].command() == ["llm-planner-robot", "--robot", "drone1", "--ros-args", "-r", "__node:=drone1_server"]
    assert node_specs("c.yaml", str(ROOT / "config" / "fleet.yaml"))[0].arguments[:4] == [
        "--config", "c.yaml", "--fleet", str(ROOT / "config" / "fleet.yaml")]


def test_robots_grouped_per_process():
    """Over 31 robot processes on one host do not all find each other under LOCALHOST
    discovery: robots can share a process, each keeping its node name."""
    specs = node_specs(None, None, robots_per_process=2)
    assert [s.arguments for s in specs[:-1]] == [["--robot", "drone1", "--robot", "drone2"], ["--robot", "arm1"]]
    assert [s.name for s in specs] == [None, "arm1_server", "llm_planner"]
    with pytest.raises(ConfigError, match="robots_per_process"):
        node_specs(None, None, robots_per_process=0)


def test_launch_files_parse_and_use_node_specs():
    for name in ("fleet.launch.py", "planner.launch.py"):
        tree = ast.parse((ROOT / "launch" / name).read_text())
        names = {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
        assert "generate_launch_description" in names
        assert "node_specs" in (ROOT / "launch" / name).read_text()


def test_console_scripts_exist():
    setup = (ROOT / "setup.py").read_text()
    for script in ("llm-planner-robot", "llm-planner-node", "llm-planner-fleet", "lrtrace", "tello-emulator"):
        assert f'"{script} = ' in setup


@pytest.mark.ros
def test_fleet_command_reports_bad_files(tmp_path, capsys):
    from llm_planner.ros.fleet_main import main

    assert main(["--fleet", str(tmp_path / "missing.yaml")]) == 2
    bad = tmp_path / "fleet.yaml"
    bad.write_text("robots:\n  - {id: drone1, type: submarine}\n")
    assert main(["--fleet", str(bad)]) == 2
    bad.write_text("robots:\n  - {id: 1drone, type: tello}\n")
    assert main(["--fleet", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "fleet file not found" in err and "submarine" in err and "must start with a letter" in err
    from llm_planner.ros.fleet_main import robot_main

    assert robot_main(["--robot", "drone1", "--robot", "nobody"]) == 2
    assert "['nobody'] are not in the fleet" in capsys.readouterr().err
