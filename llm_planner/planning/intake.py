"""Turn an incoming task (e.g. a ROS Task message's fields) into a TaskRequest, or a reason
to reject it. Shared by every front end so that bad input is refused the same way."""

from __future__ import annotations

import math
from dataclasses import dataclass

from llm_planner.domain.tasks import MAX_INSTRUCTION_BYTES, TaskRequest
from llm_planner.domain.tuf import Tuf
from llm_planner.settings.config import PlannerConfig
from llm_planner.settings.fleet import FleetConfig


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


def build_request(task_id: str, robot_id: str, instruction: str, urgency: int, beta: float, ert_s: float,
                  cutoff_s: float, *, config: PlannerConfig, fleet: FleetConfig, arrival_s: float,
                  forced_plan: str | None = None, label: str = "") -> TaskRequest | Rejection:
    def reject(reason: str) -> Rejection:
        return Rejection(task_id, robot_id, reason)

    robot = fleet.robot(robot_id)
    if robot is None:
        return reject(f"unknown robot_id {robot_id!r}; the fleet has {[r.id for r in fleet.robots]}")
    problem = instruction_problem(instruction)
    if problem:
        return reject(problem)
    if not 0 <= urgency < len(config.urgency_levels):
        return reject(f"urgency {urgency} out of range 0..{len(config.urgency_levels) - 1}")
    level = config.urgency_levels[urgency]
    if not math.isfinite(beta):
        return reject(f"TUF beta is non-finite ({beta})")
    tuf = level.tuf
    if beta > 0:  # the task's own TUF overrides its level's
        try:
            tuf = Tuf(beta, ert_s, cutoff_s)
        except ValueError as exc:
            return reject(str(exc))
    return TaskRequest(task_id=task_id, robot_id=robot_id, robot_type=robot.type, instruction=instruction,
                       level=level.name, tuf=tuf, arrival_s=arrival_s, forced_plan=forced_plan,
                       label=label)
