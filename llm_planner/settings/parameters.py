"""The planner configuration as flat, typed, described parameters: the planner node's ROS 2
parameters (llm_planner/ros/parameters.py declares them), with no ROS import here.

Names are the config's fields joined by dots (`batch.max_batch_size`, `vllm.model`), so a
params file in the standard form nests them as the config file does. Two shapes ROS 2
parameters cannot hold are mapped:
- the urgency levels, an ordered list of records: `urgency_levels` lists their names (the index
  is Task.urgency) and each level has `urgency.<name>.beta`, `.ert_s`, `.cutoff_s`, as ROS 2
  packages declare plugin lists;
- the free-form vLLM mappings `vllm.engine_args` and `vllm.sampling`: one string each, holding
  a YAML mapping.
`robot_types` stays in the config file: the robot servers read it too, and a parameter of the
planner node would let the two sides disagree.

Defaults are the config's values (config/planner.yaml over the model's defaults), so the one
source of truth stays the config; values come back through the same validator."""

from __future__ import annotations

import enum
import functools
import typing
from dataclasses import dataclass
from typing import Any

import annotated_types
import yaml
from pydantic import BaseModel, ValidationError

from llm_planner.settings.config import PlannerConfig, UrgencyLevel
from llm_planner.settings.model_file import ConfigError

LEVELS = "urgency_levels"
LEVEL_PREFIX = "urgency"
FILE_ONLY = frozenset({"robot_types"})


@dataclass(frozen=True)
class ParameterSpec:
    name: str
    type: type  # bool, int, float, str or list (of str)
    default: Any  # None: no default; the value must be given
    description: str
    minimum: float | None = None
    maximum: float | None = None
    yaml_mapping: bool = False  # a str holding a YAML mapping (a free-form dict of the config)


def parameter_specs(config: PlannerConfig) -> list[ParameterSpec]:
    """Every parameter but the urgency levels' own (`level_specs`, once their names are known)."""
    return list(_model_specs(PlannerConfig, config, ""))


def level_specs(config: PlannerConfig, name: str) -> list[ParameterSpec]:
    """The parameters of urgency level `name`; defaults from the config's level of that name
    (a level the config lacks has none: its values must be given)."""
    level = next((lvl for lvl in config.urgency_levels if lvl.name == name), None)
    specs = _model_specs(UrgencyLevel, level, f"{LEVEL_PREFIX}.{name}.")
    return [spec for spec in specs if not spec.name.endswith(".name")]


def _model_specs(model: type[BaseModel], value: BaseModel | None, prefix: str):
    for field_name, info in model.model_fields.items():
        name = prefix + field_name
        current = getattr(value, field_name) if value is not None else None
        annotation = info.annotation
        description = info.description or ""
        if name in FILE_ONLY:
            continue
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            yield from _model_specs(annotation, current, name + ".")
        elif name == LEVELS:
            yield ParameterSpec(
                name,
                list,
                [lvl.name for lvl in current] if current is not None else None,
                f"{description}: names in order; each has {LEVEL_PREFIX}.<name>.beta, .ert_s and .cutoff_s",
            )
        elif typing.get_origin(annotation) is dict:
            yield ParameterSpec(
                name,
                str,
                _yaml_mapping(current) if current is not None else None,
                f"{description} (a YAML mapping)",
                yaml_mapping=True,
            )
        else:
            kind, choices = _scalar_type(annotation)
            if choices:
                description = f"{description} (one of: {', '.join(choices)})"
            minimum, maximum = _bounds(info.metadata, integer=kind is int)
            default = current.value if isinstance(current, enum.Enum) else current
            yield ParameterSpec(name, kind, default, description, minimum, maximum)


def _scalar_type(annotation) -> tuple[type, list[str]]:
    if typing.get_origin(annotation) is typing.Literal:
        return str, [str(c) for c in typing.get_args(annotation)]
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return str, [str(m.value) for m in annotation]
    if typing.get_origin(annotation) is typing.Annotated:
        return _scalar_type(typing.get_args(annotation)[0])
    if annotation in (bool, int, float, str):
        return annotation, []
    raise TypeError(f"no parameter type for {annotation!r}")


def _bounds(metadata, integer: bool) -> tuple[float | None, float | None]:
    """Inclusive bounds for a ROS 2 range; exclusive ones become inclusive (the validator
    still rejects the bound itself)."""
    minimum: float | None = None
    maximum: float | None = None
    for item in metadata:
        if isinstance(item, (annotated_types.Ge, annotated_types.Gt)):
            bound: Any = getattr(item, "ge", getattr(item, "gt", None))  # the number a config field gives
            minimum = bound + 1 if isinstance(item, annotated_types.Gt) and integer else bound
        elif isinstance(item, (annotated_types.Le, annotated_types.Lt)):
            bound = getattr(item, "le", getattr(item, "lt", None))
            maximum = bound - 1 if isinstance(item, annotated_types.Lt) and integer else bound
    return minimum, maximum


def _yaml_mapping(value: dict) -> str:
    return yaml.safe_dump(value, default_flow_style=True, sort_keys=False).strip() if value else "{}"


def config_from_parameters(values: dict[str, Any], config: PlannerConfig) -> PlannerConfig:
    """The config with these parameter values applied, validated as a config file is; an
    error names the parameter."""
    raw = config.model_dump(mode="json")
    names = values.get(LEVELS, [lvl.name for lvl in config.urgency_levels])
    levels = [{"name": name} for name in names]
    for name, value in values.items():
        if name == LEVELS:
            continue
        if name.startswith(LEVEL_PREFIX + "."):
            level, field_name = name[len(LEVEL_PREFIX) + 1 :].rsplit(".", 1)
            if level in names:
                levels[names.index(level)][field_name] = value
            continue
        path = name.split(".")
        if name in _mapping_names():
            value = _parse_mapping(name, value)
        target = raw
        for key in path[:-1]:
            target = target.setdefault(key, {})
        target[path[-1]] = value
    raw[LEVELS] = levels
    try:
        return PlannerConfig.model_validate(raw)
    except ValidationError as exc:
        problems = "\n".join(f"  {_parameter_name(err['loc'], names)}: {err['msg']}" for err in exc.errors())
        raise ConfigError(f"invalid planner parameters:\n{problems}") from None


@functools.cache
def _mapping_names() -> frozenset[str]:
    return frozenset(spec.name for spec in _model_specs(PlannerConfig, None, "") if spec.yaml_mapping)


def _parse_mapping(name: str, text: str) -> dict:
    try:
        value = yaml.safe_load(text) if text.strip() else {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"invalid planner parameters:\n  {name}: not YAML ({exc})") from None
    if not isinstance(value, dict):
        raise ConfigError(f"invalid planner parameters:\n  {name}: must be a YAML mapping, e.g. '{{key: value}}'")
    return value


def _parameter_name(loc: tuple, level_names: list[str]) -> str:
    """A validation error's location as the parameter's name."""
    if loc and loc[0] == LEVELS:
        if len(loc) >= 2 and isinstance(loc[1], int) and loc[1] < len(level_names):
            return ".".join([LEVEL_PREFIX, level_names[loc[1]], *map(str, loc[2:3])])
        return LEVELS
    if len(loc) >= 2 and ".".join(map(str, loc[:2])) in _mapping_names():
        return ".".join(map(str, loc[:2]))
    return ".".join(str(part) for part in loc)
