"""Fleet configuration (config/fleet.yaml): which robots exist, their type and backend."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from llm_planner.settings.model_file import ConfigError, load_model_file
from llm_planner.settings.paths import data_path

# How long a robot answers for an ended segment's result. The planner asks for a result as
# the goal is accepted, so it normally has it at once; this covers an answer lost and asked
# again, or planner links that lag. A robot keeps results in its own memory (a few hundred
# bytes each), not in its action server's goal list, whose size every goal status message
# pays for (ros/robot_server.py). A planner whose links lag by more than a segment's time
# plus this loses the result (the task fails and says so).
RESULT_KEPT_S = 10.0

# ROS 2 names: the robot id becomes a namespace (`/<id>/execute_segment`).
_ROBOT_ID = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")


class RobotSafety(BaseModel):
    """A robot's safety gate (catalog/safety.py): skills by name or abbreviation."""

    model_config = ConfigDict(extra="forbid")
    allow: list[str] | None = None  # the skills plans may call (default: all of the skill set)
    forbid: list[str] = Field(default_factory=list)
    bounds: dict[str, tuple[float, float]] = Field(default_factory=dict)  # skill -> its numbers' lowest, highest
    approve: list[str] = Field(default_factory=list)  # skills whose calls wait for an operator's approval
    approval_timeout_s: float = Field(default=30.0, gt=0)  # no answer by then: the task fails


class RobotConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str
    type: str  # a robot type of config/planner.yaml
    backend: Literal["sim", "tello"] = "sim"
    # backend options: sim -> seed, time_scale, fail_on, stall_on; tello -> host, port,
    # takeoff, scene (see llm_planner/robots/backends.py)
    options: dict[str, Any] = Field(default_factory=dict)
    safety: RobotSafety | None = None

    @field_validator("id")
    @classmethod
    def _valid_name(cls, value: str) -> str:
        if not _ROBOT_ID.match(value):
            raise ValueError(f"robot id {value!r} must start with a letter and hold only letters, digits and _")
        return value


class FleetConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    robots: list[RobotConfig] = Field(min_length=1)
    # A dispatched segment that gets no result within this long (plus its estimated worst-case
    # execution time) fails its task.
    robot_timeout_s: float = Field(default=10.0, gt=0)
    result_kept_s: float = Field(default=RESULT_KEPT_S, gt=0)  # see RESULT_KEPT_S

    @model_validator(mode="after")
    def _unique(self) -> FleetConfig:
        ids = [r.id for r in self.robots]
        dup = sorted({i for i in ids if ids.count(i) > 1})
        if dup:
            raise ValueError(f"duplicate robot ids: {dup}")
        return self

    def robot(self, robot_id: str) -> RobotConfig | None:
        return next((r for r in self.robots if r.id == robot_id), None)

    def check_types(self, robot_types: dict) -> None:
        unknown = sorted({r.type for r in self.robots} - set(robot_types))
        if unknown:
            raise ConfigError(f"fleet uses robot types {unknown} not in the planner config ({sorted(robot_types)})")
        bad = [r.id for r in self.robots if r.backend == "tello" and r.type not in ("tello",)]
        if bad:
            raise ConfigError(f"robots {bad}: backend 'tello' needs robot type 'tello'")


def load_fleet(path: str | Path | None = None) -> FleetConfig:
    path = Path(path) if path else data_path("config", "fleet.yaml")
    return load_model_file(FleetConfig, path, "fleet file")


def fleet_for_agents(agent_types: dict[str, str], **options) -> FleetConfig:
    """A simulated fleet with one robot per workload agent (robot id -> robot type)."""
    return FleetConfig(
        robots=[
            RobotConfig(id=rid, type=rtype, backend="sim", options=dict(options))
            for rid, rtype in sorted(agent_types.items())
        ]
    )
