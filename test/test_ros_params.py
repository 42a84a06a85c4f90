"""The planner's settings as ROS 2 parameters: declared from the config, set by a params file
in the standard form, validated as the config file is, read-only while the node runs."""

import os
import subprocess
import sys
import time
from contextlib import contextmanager

import pytest
import yaml
from ros_fixtures import launched, rclpy, stop_launched

from llm_planner.ros.fleet_main import node_specs
from llm_planner.ros.parameters import declare_planner_parameters
from llm_planner.settings.config import PlannerConfig, load_planner_config
from llm_planner.settings.model_file import ConfigError
from llm_planner.settings.parameters import config_from_parameters, level_specs, parameter_specs
from llm_planner.settings.paths import data_path

pytestmark = pytest.mark.ros

PARAMS_FILE = data_path("config", "planner_params.yaml")


def _leaf_fields(model, prefix=""):
    for name, info in model.model_fields.items():
        annotation = info.annotation
        if isinstance(annotation, type) and hasattr(annotation, "model_fields"):
            yield from _leaf_fields(annotation, f"{prefix}{name}.")
        else:
            yield prefix + name


def test_every_setting_but_the_robot_types_is_a_parameter():
    config = load_planner_config()
    specs = parameter_specs(config) + [s for lvl in config.urgency_levels for s in level_specs(config, lvl.name)]
    names = {s.name for s in specs}
    assert set(_leaf_fields(PlannerConfig)) - names == {"robot_types"}  # shared with the robot servers
    assert {"urgency.urgent.beta", "urgency.normal.cutoff_s", "vllm.engine_args"} <= names
    assert all(s.description for s in specs), [s.name for s in specs if not s.description]
    batch = next(s for s in specs if s.name == "batch.max_batch_size")
    assert (batch.type, batch.default, batch.minimum) == (int, 32, 1)
    # The defaults are the config's values: unchanged, they give the config back.
    assert config_from_parameters({s.name: s.default for s in specs}, config) == config


def _declared(tmp_path, params: dict, *files):
    """The config a planner node gets from these params files and a file with `params`."""
    extra = tmp_path / "extra.yaml"
    extra.write_text(yaml.safe_dump({"llm_planner": {"ros__parameters": params}}))
    args = ["--ros-args"] + [a for f in (*files, extra) for a in ("--params-file", str(f))]
    if not rclpy.ok():
        rclpy.init()
    node = rclpy.node.Node("llm_planner", cli_args=args)
    try:
        return declare_planner_parameters(node, load_planner_config())
    finally:
        node.destroy_node()


def test_the_committed_params_file_holds_the_defaults(tmp_path):
    assert _declared(tmp_path, {}, PARAMS_FILE) == load_planner_config()


def test_a_params_file_sets_the_planner(tmp_path):
    config = _declared(tmp_path, {
        "policy": "edf", "batch": {"max_batch_size": 4}, "features": {"hold": False},
        "urgency_levels": ["normal", "urgent", "critical"],
        "urgency": {"critical": {"beta": 4.0, "ert_s": 0.1, "cutoff_s": 0.3}},
        "vllm": {"engine_args": "{dtype: float16, max_model_len: 2048}"}}, PARAMS_FILE)
    assert (config.policy, config.batch.max_batch_size, config.features.hold) == ("edf", 4, False)
    assert [lvl.name for lvl in config.urgency_levels] == ["normal", "urgent", "critical"]
    assert config.level("critical").tuf.as_triple() == (4.0, 0.1, 0.3)
    assert config.level("urgent").tuf.as_triple() == (2.0, 0.2, 0.5)  # kept from the config
    assert config.vllm.engine_args == {"dtype": "float16", "max_model_len": 2048}
    assert config.robot_types == load_planner_config().robot_types


@pytest.mark.parametrize("params, message", [
    ({"batch": {"max_batch_size": 0}}, "batch.max_batch_size: must be at least 1, got 0"),
    ({"batch": {"max_batch_size": "many"}}, "batch.max_batch_size: must be an integer, got string 'many'"),
    ({"urgency": {"urgent": {"beta": 2}}}, "urgency.urgent.beta: must be a floating-point number"),
    ({"policy": "fastest"}, "policy: Input should be 'timely'"),
    ({"exec_estimate": "q200"}, "exec_estimate: Value error, unknown estimate statistic 'q200'"),
    ({"batch": {"max_bach_size": 8}}, "unknown parameter(s) batch.max_bach_size"),
    ({"urgency": {"urgent": {"cutoff_s": 0.1}}}, "urgency.urgent: Value error, urgency level 'urgent': TUF cutoff_s"),
    ({"urgency_levels": ["normal", "critical"]}, "urgency.critical.beta: required"),
    ({"vllm": {"engine_args": "[1, 2]"}}, "vllm.engine_args: must be a YAML mapping"),
])
def test_a_bad_parameter_is_rejected_with_its_name(tmp_path, params, message):
    with pytest.raises(ConfigError) as failure:
        _declared(tmp_path, params)
    assert message in str(failure.value)


def test_the_launched_planner_node_takes_its_params_file(tmp_path):
    """As fleet.launch.py starts it: the params file, then the policy argument over it; the
    parameters are visible and read-only over ROS 2; a bad file stops the node with the name."""
    from rclpy.parameter import Parameter

    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump({"llm_planner": {"ros__parameters": {"policy": "fcfs",
                                                                          "batch": {"max_batch_size": 5}}}}))
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"llm_planner": {"ros__parameters": {"features": {"hold": "yes"}}}}))
    refused = subprocess.run(node_specs(None, None, params_file=str(bad))[-1].command(), capture_output=True,
                             text=True, timeout=60, env=os.environ)
    assert refused.returncode == 2 and "features.hold: must be a boolean" in refused.stderr, refused.stderr

    with _launched_planner(node_specs(None, None, policy="edf", params_file=str(params))[-1].command()) as client:
        got = _result(client.get_parameters(["policy", "batch.max_batch_size", "urgency.urgent.ert_s"]))
        assert [v.string_value or v.integer_value or v.double_value for v in got.values] == ["edf", 5, 0.2]
        described = _result(client.describe_parameters(["batch.max_batch_size"])).descriptors[0]
        assert described.read_only and described.integer_range[0].from_value == 1 and described.description
        change = _result(client.set_parameters([Parameter("policy", value="vllm")])).results[0]
        assert not change.successful


def test_the_policy_argument_wins_over_a_params_file(tmp_path):
    """`llm-planner-node --policy edf --ros-args --params-file F` where F says fcfs: edf."""
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump({"llm_planner": {"ros__parameters": {"policy": "fcfs"}}}))
    command = ["llm-planner-node", "--policy", "edf", "--ros-args", "--params-file", str(params)]
    with _launched_planner(command) as client:
        assert _result(client.get_parameters(["policy"])).values[0].string_value == "edf"


@contextmanager
def _launched_planner(command: list[str]):
    """The planner node started with `command`, and a client of its parameter services; it
    must stop cleanly at the end."""
    from rclpy.parameter_client import AsyncParameterClient

    from llm_planner.ros.spin import spin_node

    if not rclpy.ok():
        rclpy.init()
    probe = rclpy.node.Node("params_probe")
    spinning = spin_node(probe)
    planner = launched(command)
    try:
        client = AsyncParameterClient(probe, "/llm_planner")
        assert client.wait_for_services(timeout_sec=60), "the planner node's parameter services never came"
        yield client
    finally:
        spinning.shutdown()
        [(_, _, stderr, code)] = stop_launched([planner])
    assert code == 0, stderr[-3000:]


def _result(future, timeout_s: float = 30.0):
    deadline = time.monotonic() + timeout_s
    while not future.done() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert future.done(), "no answer from the planner node"
    return future.result()


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
