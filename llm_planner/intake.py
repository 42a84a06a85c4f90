"""Turn an incoming task (e.g. a ROS Task message's fields) into a TaskRequest, or a reason
to reject it. Shared by every front end so that bad input is refused the same way."""

from __future__ import annotations

import math
from dataclasses import dataclass

from .config import PlannerConfig
from .fleet import FleetConfig
from .tasks import MAX_INSTRUCTION_BYTES, TaskRequest
from .tuf import Tuf


@dataclass(frozen=True)
class Rejection:
    task_id: str
    robot_id: str
    reason: str


def build_request(task_id: str, robot_id: str, instruction: str, urgency: int, beta: float, ert_s: float,
                  cutoff_s: float, *, config: PlannerConfig, fleet: FleetConfig, arrival_s: float,
                  forced_plan: str | None = None, label: str = "") -> TaskRequest | Rejection:
    def reject(reason: str) -> Rejection:
        return Rejection(task_id, robot_id, reason)

    robot = fleet.robot(robot_id)
    if robot is None:
        return reject(f"unknown robot_id {robot_id!r}; the fleet has {[r.id for r in fleet.robots]}")
    if not instruction.strip():
        return reject("empty instruction")
    if len(instruction.encode()) > MAX_INSTRUCTION_BYTES:
        return reject(f"instruction longer than {MAX_INSTRUCTION_BYTES} bytes ({len(instruction.encode())})")
    if not 0 <= urgency < len(config.urgency_levels):
        return reject(f"urgency {urgency} out of range 0..{len(config.urgency_levels) - 1}")
    level = config.urgency_levels[urgency]
    if not all(math.isfinite(v) for v in (beta, ert_s, cutoff_s)):
        return reject(f"non-finite TUF numbers (beta={beta}, ert_s={ert_s}, cutoff_s={cutoff_s})")
    if beta > 0:
        if ert_s < 0:
            return reject(f"ert_s must be >= 0, got {ert_s}")
        if cutoff_s <= ert_s:
            return reject(f"cutoff_s ({cutoff_s}) must be greater than ert_s ({ert_s})")
        tuf = Tuf(beta, ert_s, cutoff_s)
    else:
        tuf = level.tuf
    return TaskRequest(task_id=task_id, robot_id=robot_id, robot_type=robot.type, instruction=instruction,
                       level=level.name, tuf=tuf, arrival_s=arrival_s, forced_plan=forced_plan,
                       label=label)
