"""The planner's settings as the planner node's ROS 2 parameters: typed, described, with
ranges, read-only once the node runs (the planner is built from them at start). Names and
defaults come from llm_planner/settings/parameters.py; a params file in the standard form
(`llm_planner: ros__parameters: ...`, `--ros-args --params-file F`) overrides them, and the
values go through the config's validator, so a bad value is rejected with its name."""

from __future__ import annotations

import sys

from rcl_interfaces.msg import FloatingPointRange, IntegerRange, ParameterDescriptor
from rclpy.exceptions import InvalidParameterTypeException, InvalidParameterValueException
from rclpy.node import Node
from rclpy.parameter import Parameter

from llm_planner.ros.rclpy_compat import parameter_overrides
from llm_planner.settings.config import PlannerConfig
from llm_planner.settings.model_file import ConfigError
from llm_planner.settings.parameters import (
    LEVELS,
    ParameterSpec,
    config_from_parameters,
    level_specs,
    parameter_specs,
)

_TYPES = {
    bool: Parameter.Type.BOOL,
    int: Parameter.Type.INTEGER,
    float: Parameter.Type.DOUBLE,
    str: Parameter.Type.STRING,
    list: Parameter.Type.STRING_ARRAY,
}
_TYPE_WORDS = {
    bool: "a boolean",
    int: "an integer",
    float: "a floating-point number (write 2.0, not 2)",
    str: "a string",
    list: "a list of strings",
}
_INT64_MAX = 2**63 - 1


def declare_planner_parameters(node: Node, config: PlannerConfig) -> PlannerConfig:
    """Declare every planner parameter on `node` with `config`'s values as defaults, and
    return the config the node's parameter overrides make (ConfigError naming the parameter
    if one is invalid or unknown)."""
    values = {spec.name: _declare(node, spec) for spec in parameter_specs(config)}
    for level in values[LEVELS]:
        values.update({spec.name: _declare(node, spec) for spec in level_specs(config, level)})
    unknown = sorted(
        name
        for name in parameter_overrides(node)
        if not node.has_parameter(name) and not name.startswith("qos_overrides.")
    )
    if unknown:
        raise ConfigError(
            f"invalid planner parameters:\n  unknown parameter(s) {', '.join(unknown)} "
            f"(`ros2 param list {node.get_fully_qualified_name()}` lists them)"
        )
    return config_from_parameters(values, config)


def _declare(node: Node, spec: ParameterSpec):
    kind = _TYPES[spec.type]
    descriptor = ParameterDescriptor(description=spec.description, read_only=True, type=kind.value)
    if spec.minimum is not None or spec.maximum is not None:
        if spec.type is int:
            descriptor.integer_range = [
                IntegerRange(
                    from_value=int(spec.minimum if spec.minimum is not None else -_INT64_MAX),
                    to_value=int(spec.maximum if spec.maximum is not None else _INT64_MAX),
                    step=0,
                )
            ]
        else:
            descriptor.floating_point_range = [
                FloatingPointRange(
                    from_value=float(spec.minimum if spec.minimum is not None else -sys.float_info.max),
                    to_value=float(spec.maximum if spec.maximum is not None else sys.float_info.max),
                    step=0.0,
                )
            ]
    try:
        parameter = node.declare_parameter(spec.name, spec.default if spec.default is not None else kind, descriptor)
    except InvalidParameterTypeException:
        given = parameter_overrides(node).get(spec.name)
        shown = f"{given.type_.name.lower()} {given.value!r}" if given is not None else "another type"
        raise ConfigError(
            f"invalid planner parameters:\n  {spec.name}: must be {_TYPE_WORDS[spec.type]}, got {shown}"
        ) from None
    except InvalidParameterValueException:
        given = parameter_overrides(node).get(spec.name)
        raise ConfigError(
            f"invalid planner parameters:\n  {spec.name}: must be {_range_words(spec)}, got "
            f"{given.value if given is not None else 'another value'}"
        ) from None
    if parameter.type_ == Parameter.Type.NOT_SET:
        raise ConfigError(f"invalid planner parameters:\n  {spec.name}: required (no default for it)")
    return parameter.value


def _range_words(spec: ParameterSpec) -> str:
    bounds = [
        f"at least {spec.minimum}" if spec.minimum is not None else "",
        f"at most {spec.maximum}" if spec.maximum is not None else "",
    ]
    return " and ".join(b for b in bounds if b)
