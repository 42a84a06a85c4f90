"""The decision trace: one typed event for each scheduling decision, with its reason code
and the figures the rule used.

The planner core writes it in live and simulated runs alike. Off (no trace given), no event
is built: every call site asks `if trace is not None` first. On, a task's repeated deferral
for the same reason is kept once (the batch controller weighs the queue every iteration);
the event ending the wait says how long it lasted.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Callable, Iterable

Figure = float | int | str | bool


class Kind(StrEnum):
    QUEUED = "queued"  # into the ready queue, with its priority
    ADMITTED = "admitted"  # into an engine's batch (its prompt prefilled)
    RESUMED = "resumed"  # back into the batch, its context kept
    DEFERRED = "deferred"  # left in the queue this iteration
    SUSPENDED = "suspended"  # out of the batch, its context kept
    HELD = "held"  # generated segments kept back from the robot
    STREAMED = "streamed"  # generated segments sent to the robot
    PLACED = "placed"  # on an engine replica
    MOVED = "moved"  # from one replica to another
    REPLANNED = "replanned"  # a failed call gave it an error follow-up
    LOST_UTILITY = "lost_utility"  # an executed unit earned less than its TUF's maximum
    ENDED = "ended"  # a terminal state


class Reason(StrEnum):
    # queued
    ARRIVAL = "arrival"
    SEGMENT_DONE = "segment_done"  # paused after a segment (the paper's policy)
    ROBOT_REPORT = "robot_report"  # its robot's expected free time moved: a new reference
    REQUEUED = "requeued"  # back in the queue after a suspension
    # admitted, resumed
    FITS = "fits"  # no running deadline at risk
    IMPORTANCE_GUARD = "importance_guard"  # at risk, but the newcomer loses more by waiting
    PREEMPTS = "preempts"  # it takes the place of a lower-priority running generation
    # deferred
    BATCH_FULL = "batch_full"  # no place and none it may take
    PROTECTED = "protected"  # every place held by one the importance guard protects
    KV_FULL = "kv_full"  # no KV cache room
    KEEP_DEADLINES = "keep_deadlines"  # a running segment would miss its deadline (TimelyLLM 4.4)
    LATENCY_GUIDED = "latency_guided"  # the running lose more in its company than it loses by waiting
    KEPT_OUT = "kept_out"  # it would slow a more important running segment that still earns
    CONSOLIDATION = "consolidation"  # rtlm: its length is unlike the batch's
    BEHIND = "behind"  # admission stopped at a generation ahead of it
    # suspended
    PREEMPTED = "preempted"
    SHRUNK = "shrunk"  # so that a more important segment decodes at a smaller batch
    PAUSED = "paused"  # after a segment, until its robot needs more (the paper's policy)
    ENGINE_RESTART = "engine_restart"
    # held, streamed
    HOLD_RULE = "hold_rule"  # the hold rule's comparison of expected utilities
    EACH_SEGMENT = "each_segment"  # the policy sends every segment at once
    PLAN_DONE = "plan_done"  # the plan is complete: everything held goes
    # placed, moved
    PLACEMENT = "placement"
    # replanned
    ROBOT_FAILURE = "robot_failure"
    # lost utility
    LATE_RESPONSE = "late_response"  # the first unit started after the TUF_0 deadline
    ROBOT_WAITED = "robot_waited"  # the robot waited for the unit past the TUF_1 deadline
    # ended: the task's terminal state
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELED = "canceled"
    REJECTED = "rejected"


@dataclass(frozen=True, slots=True)
class Decision:
    t_s: float
    task_id: str
    kind: Kind
    reason: Reason
    figures: dict[str, Figure] = field(default_factory=dict)

    def to_json(self) -> dict:
        return {"t_s": self.t_s, "task_id": self.task_id, "kind": self.kind.value, "reason": self.reason.value,
                "figures": self.figures}

    @classmethod
    def from_json(cls, data: dict) -> Decision:
        return cls(float(data["t_s"]), str(data["task_id"]), Kind(data["kind"]), Reason(data["reason"]),
                   dict(data.get("figures", {})))


class DecisionTrace:
    """Collects a run's decisions in order, and passes each to `listener` (a live view, a
    recorder) as it is made."""

    def __init__(self, listener: Callable[[Decision], None] | None = None) -> None:
        self.decisions: list[Decision] = []
        self._listener = listener
        self._deferred: dict[str, Reason] = {}  # each task's deferral in force, kept once

    def record(self, t_s: float, task_id: str, kind: Kind, reason: Reason, **figures: Figure) -> None:
        if kind is Kind.DEFERRED:
            if self._deferred.get(task_id) is reason:
                return
            self._deferred[task_id] = reason
        elif kind is not Kind.QUEUED:
            self._deferred.pop(task_id, None)
        decision = Decision(t_s, task_id, kind, reason, figures)
        self.decisions.append(decision)
        if self._listener is not None:
            self._listener(decision)

    def of_task(self, task_id: str) -> list[Decision]:
        return [d for d in self.decisions if d.task_id == task_id]


def write_decisions(runs: Iterable[tuple[str, list[Decision]]], path: str | Path) -> None:
    """One JSON object a line, each with the label of the run it belongs to."""
    with open(path, "w") as f:
        for run, decisions in runs:
            for d in decisions:
                f.write(json.dumps({"run": run, **d.to_json()}) + "\n")


def read_decisions(path: str | Path) -> dict[str, list[Decision]]:
    """Each run's decisions, in order, from a file `write_decisions` wrote."""
    runs: dict[str, list[Decision]] = {}
    with open(path) as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                data = json.loads(line)
                runs.setdefault(str(data["run"]), []).append(Decision.from_json(data))
            except (ValueError, KeyError) as exc:
                raise ValueError(f"{path}:{n}: not a decision ({exc})") from None
    return runs
