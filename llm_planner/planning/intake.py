"""Turn an incoming task into a TaskRequest, or a reason to reject it: the one builder of
every front end (the ROS node, the simulation, LRTrace replay and recordings), so that bad
input is refused, and good input leveled, the same way everywhere."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from llm_planner.domain.tasks import MAX_INSTRUCTION_BYTES, TaskRequest
from llm_planner.domain.tuf import Tuf
from llm_planner.settings.config import PlannerConfig


@dataclass(frozen=True)
class TaskFields:
    """A task as a front end receives it (the fields of a ROS Task message). `beta` > 0 gives
    the task a TUF of its own instead of its urgency level's."""

    task_id: str
    robot_id: str
    instruction: str
    urgency: int
    beta: float = 0.0
    ert_s: float = 0.0
    cutoff_s: float = 0.0


@dataclass(frozen=True)
class Rejection:
    task_id: str
    robot_id: str
    reason: str


def instruction_problem(instruction: str) -> str | None:
    """Why an instruction cannot be planned, or None (every way in checks it here)."""
    if not instruction.strip():
        return "empty instruction"
    if len(instruction.encode()) > MAX_INSTRUCTION_BYTES:
        return f"instruction longer than {MAX_INSTRUCTION_BYTES} bytes ({len(instruction.encode())})"
    return None


def build_request(
    task: TaskFields,
    *,
    config: PlannerConfig,
    robot_types: Mapping[str, str],
    arrival_s: float,
    recorded_plan: str | None = None,
    label: str = "",
) -> TaskRequest | Rejection:
    """`robot_types`: robot id -> robot type of the robots that may be addressed (the fleet)."""

    def reject(reason: str) -> Rejection:
        return Rejection(task.task_id, task.robot_id, reason)

    robot_type = robot_types.get(task.robot_id)
    if robot_type is None:
        return reject(f"unknown robot_id {task.robot_id!r}; the fleet has {sorted(robot_types)}")
    problem = instruction_problem(task.instruction)
    if problem:
        return reject(problem)
    try:
        level_name, tuf = urgency_tuf(config, task.urgency, task.beta, task.ert_s, task.cutoff_s)
    except ValueError as exc:
        return reject(str(exc))
    return TaskRequest(
        task_id=task.task_id,
        robot_id=task.robot_id,
        robot_type=robot_type,
        instruction=task.instruction,
        urgency_name=level_name,
        tuf=tuf,
        arrival_s=arrival_s,
        recorded_plan=recorded_plan,
        label=label,
    )


def urgency_tuf(
    config: PlannerConfig, urgency: int, beta: float = 0.0, ert_s: float = 0.0, cutoff_s: float = 0.0
) -> tuple[str, Tuf]:
    """(the urgency level's name, the TUF in force) for a task's urgency fields: the level's
    TUF, or its own where `beta` > 0. ValueError with the reason for bad fields."""
    if not 0 <= urgency < len(config.urgency_levels):
        raise ValueError(f"urgency {urgency} out of range 0..{len(config.urgency_levels) - 1}")
    if not math.isfinite(beta):
        raise ValueError(f"TUF beta is non-finite ({beta})")
    level = config.urgency_levels[urgency]
    return level.name, Tuf(beta, ert_s, cutoff_s) if beta > 0 else level.tuf


def urgency_index(config: PlannerConfig, tuf: Tuf | None, level_name: str) -> int:
    """The urgency a task is sent with: the level whose TUF it carries, else the named one."""
    names = [lvl.name for lvl in config.urgency_levels]
    name = (config.level_for_tuf(tuf) if tuf is not None else None) or level_name
    if name not in names:
        raise ValueError(f"urgency level {name!r} is not configured (levels: {names})")
    return names.index(name)
