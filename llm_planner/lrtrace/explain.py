"""Why did a task wait? Its decisions as a timeline, and the decision that cost a late task most.

A wait begins at a decision that keeps the task from the engine or its robot (deferred,
suspended, held) and lasts until the task's next decision of another kind or reason (a
re-queue with a new reference does not end it). The costliest decision of a task that lost
utility is its longest such wait before the loss.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from llm_planner.domain.decisions import Decision, Kind

WAITS = (Kind.DEFERRED, Kind.SUSPENDED, Kind.HELD)
_NOT_AN_END = (Kind.QUEUED, Kind.LOST_UTILITY, Kind.PLACED)  # these do not end a wait


@dataclass(frozen=True)
class Step:
    decision: Decision
    lasted_s: float  # until the task's next decision that ends it (waits only; else 0)


@dataclass(frozen=True)
class LateTask:
    task_id: str
    lost: float  # utility below the maximum, summed over its executed units
    costliest: Step | None  # its longest wait before it lost utility; None if it never waited
    first_segment_s: float  # from its first admission to its first segment sent or held (nan: none)


def timeline(decisions: list[Decision], task_id: str) -> list[Step]:
    """The task's decisions in order, each wait with how long it lasted."""
    own = [d for d in decisions if d.task_id == task_id]
    steps = []
    for i, d in enumerate(own):
        lasted = 0.0
        if d.kind in WAITS:
            end = next((e for e in own[i + 1:] if e.kind not in _NOT_AN_END
                        and (e.kind, e.reason) != (d.kind, d.reason)), None)
            lasted = (end.t_s if end is not None else own[-1].t_s) - d.t_s
        steps.append(Step(d, lasted))
    return steps


def late_tasks(decisions: list[Decision]) -> list[LateTask]:
    """Tasks that lost utility, the most lost first."""
    lost: dict[str, float] = {}
    first_loss: dict[str, float] = {}
    for d in decisions:
        if d.kind is Kind.LOST_UTILITY:
            lost[d.task_id] = lost.get(d.task_id, 0.0) + float(d.figures["most"]) - float(d.figures["earned"])
            first_loss.setdefault(d.task_id, d.t_s)
    out = []
    for task_id, amount in lost.items():
        waits = [s for s in timeline(decisions, task_id)
                 if s.decision.kind in WAITS and s.decision.t_s <= first_loss[task_id] and s.lasted_s > 0]
        out.append(LateTask(task_id, amount, max(waits, key=lambda s: s.lasted_s, default=None),
                            _first_segment_s(decisions, task_id)))
    return sorted(out, key=lambda t: (-t.lost, t.task_id))


def _first_segment_s(decisions: list[Decision], task_id: str) -> float:
    own = [d for d in decisions if d.task_id == task_id]
    admitted = next((d.t_s for d in own if d.kind is Kind.ADMITTED), None)
    written = next((d.t_s for d in own if d.kind in (Kind.STREAMED, Kind.HELD)), None)
    return written - admitted if admitted is not None and written is not None else math.nan


def describe(step: Step) -> str:
    d = step.decision
    figures = " ".join(f"{k}={v}" for k, v in d.figures.items())
    lasted = f"  ({step.lasted_s:.3f} s)" if d.kind in WAITS else ""
    return f"{d.t_s:10.3f} s  {d.kind.value:12s} {d.reason.value:17s} {figures}{lasted}".rstrip()


def describe_late(task: LateTask) -> str:
    if task.costliest is None:
        return (f"{task.task_id}: lost {task.lost:.3f}; no scheduling decision kept it waiting "
                f"(its first segment took {task.first_segment_s:.3f} s to generate once admitted)")
    d = task.costliest.decision
    return (f"{task.task_id}: lost {task.lost:.3f}; costliest: {d.kind.value} ({d.reason.value}) at {d.t_s:.3f} s "
            f"for {task.costliest.lasted_s:.3f} s")
