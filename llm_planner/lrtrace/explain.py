"""Why did a task wait? Its decisions as a timeline, and the decision that cost a late task most.

A wait begins at a decision that keeps the task from the engine or its robot (deferred,
suspended, held) and lasts until the task's next decision of another kind or reason (a
re-queue with a new reference does not end it). The costliest decision of a task that lost
utility is its longest such wait before the loss.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from llm_planner.domain.decisions import Decision, Iteration, Kind, Reason

WAITS = (Kind.DEFERRED, Kind.SUSPENDED, Kind.HELD)
ROBOT_BUSY_S = 0.05  # a robot that starts a unit later than this after it was sent was busy
_NOT_AN_END = (Kind.QUEUED, Kind.LOST_UTILITY, Kind.PLACED)  # these do not end a wait


@dataclass(frozen=True)
class Step:
    decision: Decision
    lasted_s: float  # a wait: until the task's next decision that ends it (else 0)
    continues: bool = False  # a wait the task was already in, decided again (its time counts once)


@dataclass(frozen=True)
class FirstSegment:
    """How the task's first segment was generated once admitted."""

    seconds: float
    batch_at_admission: int
    largest_batch: int  # the largest batch it decoded in before the segment was written


@dataclass(frozen=True)
class LateTask:
    task_id: str
    lost: float  # utility below the maximum, summed over its executed units
    costliest: Step | None  # its longest wait before it lost utility; None if it never waited
    first_segment: FirstSegment | None
    robot_busy_s: float = 0.0  # a late first unit: from its segment sent to its robot starting it


def by_task(decisions: list[Decision]) -> dict[str, list[Decision]]:
    tasks: dict[str, list[Decision]] = {}
    for d in decisions:
        tasks.setdefault(d.task_id, []).append(d)
    return tasks


def timeline(decisions: list[Decision], task_id: str) -> list[Step]:
    """The task's decisions in order, each wait with how long it lasted."""
    return _steps([d for d in decisions if d.task_id == task_id])


def _steps(own: list[Decision]) -> list[Step]:
    steps, previous = [], None  # previous: the last decision that could end a wait
    for i, d in enumerate(own):
        if d.kind not in WAITS:
            steps.append(Step(d, 0.0))
        elif previous is not None and (previous.kind, previous.reason) == (d.kind, d.reason):
            steps.append(Step(d, 0.0, continues=True))
        else:
            end = next(
                (e for e in own[i + 1 :] if e.kind not in _NOT_AN_END and (e.kind, e.reason) != (d.kind, d.reason)),
                None,
            )
            steps.append(Step(d, (end.t_s if end is not None else own[-1].t_s) - d.t_s))
        if d.kind not in _NOT_AN_END:
            previous = d
    return steps


def late_tasks(decisions: list[Decision], iterations: Sequence[Iteration] = ()) -> list[LateTask]:
    """Tasks that lost utility, the most lost first. `iterations`: the run's engine
    iterations, to tell the batch each first segment was generated in."""
    tasks = by_task(decisions)
    out = []
    for task_id, own in tasks.items():
        losses = [d for d in own if d.kind is Kind.LOST_UTILITY]
        if not losses:
            continue
        lost = sum(float(d.figures["most"]) - float(d.figures["earned"]) for d in losses)
        waits = [
            s for s in _steps(own) if s.decision.kind in WAITS and s.decision.t_s <= losses[0].t_s and s.lasted_s > 0
        ]
        out.append(
            LateTask(
                task_id,
                lost,
                max(waits, key=lambda s: s.lasted_s, default=None),
                _first_segment(own, iterations),
                _robot_busy_s(own),
            )
        )
    return sorted(out, key=lambda t: (-t.lost, t.task_id))


def _robot_busy_s(own: list[Decision]) -> float:
    """How long the robot took to start the first unit once it was sent (busy with earlier
    work, e.g. the task before it), where the first unit was late."""
    arrival = next((d for d in own if d.kind is Kind.QUEUED and d.reason is Reason.ARRIVAL), None)
    sent = next((d for d in own if d.kind is Kind.STREAMED), None)
    late = next((d for d in own if d.reason is Reason.LATE_RESPONSE), None)
    if arrival is None or sent is None or late is None:
        return 0.0
    return max(0.0, float(arrival.figures["ref_s"]) + float(late.figures["response_s"]) - sent.t_s)


def _first_segment(own: list[Decision], iterations: Sequence[Iteration]) -> FirstSegment | None:
    admitted = next((d for d in own if d.kind is Kind.ADMITTED), None)
    written = next((d.t_s for d in own if d.kind in (Kind.STREAMED, Kind.HELD)), None)
    if admitted is None or written is None:
        return None
    task_id = own[0].task_id
    batches = [len(i.members) for i in iterations if admitted.t_s <= i.t_s < written and task_id in i.members]
    return FirstSegment(written - admitted.t_s, int(admitted.figures.get("batch", 0)), max(batches, default=0))


def describe(step: Step) -> str:
    d = step.decision
    figures = " ".join(f"{k}={v}" for k, v in d.figures.items())
    lasted = ("  (continues)" if step.continues else f"  ({step.lasted_s:.3f} s)") if d.kind in WAITS else ""
    return f"{d.t_s:10.3f} s  {d.kind.value:12s} {d.reason.value:17s} {figures}{lasted}".rstrip()


def describe_late(task: LateTask) -> str:
    """The late task's costliest cause first: the planner's longest wait, or its robot busy."""
    busy = (
        (f"its robot started the first unit {task.robot_busy_s:.3f} s after it was sent (busy with earlier work)")
        if task.robot_busy_s >= ROBOT_BUSY_S
        else ""
    )
    wait = task.costliest
    if wait is None:
        first = task.first_segment
        planner = "no scheduling decision kept it waiting" + (
            ""
            if first is None
            else (
                f" (its first segment took {first.seconds:.3f} s to generate once admitted, at batch "
                f"{first.batch_at_admission}"
                + (f" growing to {first.largest_batch}" if first.largest_batch > first.batch_at_admission else "")
                + ")"
            )
        )
    else:
        d = wait.decision
        planner = f"costliest: {d.kind.value} ({d.reason.value}) at {d.t_s:.3f} s for {wait.lasted_s:.3f} s"
    causes = [busy, planner] if busy and (wait is None or task.robot_busy_s > wait.lasted_s) else [planner, busy]
    return f"{task.task_id}: lost {task.lost:.3f}; " + "; ".join(c for c in causes if c)
