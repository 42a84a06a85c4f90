"""The decision trace: one typed event for each scheduling decision, with its reason code
and the figures the rule used, and one for each engine iteration (its batch and time).

The planner core writes it in live and simulated runs alike. Off (no trace given), no event
is built: every call site asks `if trace is not None` first. On, a task's repeated deferral
for the same reason is kept once (the batch controller weighs the queue every iteration);
the event ending the wait says how long it lasted.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

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
    URGENCY_CHANGED = "urgency_changed"  # an operator changed its urgency or TUF
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
    AWAITING_APPROVAL = "awaiting_approval"  # a call the robot's safety gate lets go only once approved
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
        return {
            "t_s": self.t_s,
            "task_id": self.task_id,
            "kind": self.kind.value,
            "reason": self.reason.value,
            "figures": self.figures,
        }

    @classmethod
    def from_json(cls, data: dict) -> Decision:
        return cls(
            float(data["t_s"]),
            str(data["task_id"]),
            Kind(data["kind"]),
            Reason(data["reason"]),
            dict(data.get("figures", {})),
        )


@dataclass(frozen=True, slots=True)
class Iteration:
    """One engine iteration: when it started, on which replica, how long it took against the
    profile's decode-only prediction, its batch, and what it prefilled and started."""

    t_s: float
    replica: int
    duration_s: float
    predicted_s: float  # the profile's decode step at this batch and context
    members: tuple[str, ...]  # the generations in the batch
    prefill_tokens: int
    started: int  # generations that joined it (new prompts, resumes, moves)

    def to_json(self) -> dict:
        return {
            "t_s": self.t_s,
            "replica": self.replica,
            "duration_s": self.duration_s,
            "predicted_s": self.predicted_s,
            "members": list(self.members),
            "prefill_tokens": self.prefill_tokens,
            "started": self.started,
        }

    @classmethod
    def from_json(cls, data: dict) -> Iteration:
        return cls(
            float(data["t_s"]),
            int(data["replica"]),
            float(data["duration_s"]),
            float(data["predicted_s"]),
            tuple(data["members"]),
            int(data["prefill_tokens"]),
            int(data["started"]),
        )


class DecisionTrace:
    """Collects a run's decisions and engine iterations in order, and passes each to
    `listener` (a live view, a recorder) as it is made."""

    def __init__(self, listener: Callable[[Decision | Iteration], None] | None = None) -> None:
        self.decisions: list[Decision] = []
        self.iterations: list[Iteration] = []
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

    def iteration(self, iteration: Iteration) -> None:
        self.iterations.append(iteration)
        if self._listener is not None:
            self._listener(iteration)


@dataclass
class TracedRun:
    """One run's trace as a file holds it."""

    decisions: list[Decision] = field(default_factory=list)
    iterations: list[Iteration] = field(default_factory=list)


def as_line(run: str, event: Decision | Iteration) -> str:
    """One JSON line of a trace file: an iteration carries `duration_s`, a decision `kind`."""
    return json.dumps({"run": run, **event.to_json()}) + "\n"


def write_decisions(runs: Iterable[tuple[str, DecisionTrace | TracedRun]], path: str | Path) -> None:
    """Every run's decisions and iterations, one JSON object a line, each with its run's label."""
    with open(path, "w") as f:
        for run, trace in runs:
            events: list[Decision | Iteration] = [*trace.decisions, *trace.iterations]
            for event in events:
                f.write(as_line(run, event))


def read_decisions(path: str | Path) -> dict[str, TracedRun]:
    """Each run's trace, in order, from a file `write_decisions` wrote."""
    runs: dict[str, TracedRun] = {}
    with open(path) as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                data = json.loads(line)
                run = runs.setdefault(str(data["run"]), TracedRun())
                if "duration_s" in data:
                    run.iterations.append(Iteration.from_json(data))
                else:
                    run.decisions.append(Decision.from_json(data))
            except (ValueError, KeyError, TypeError) as exc:
                raise ValueError(f"{path}:{n}: neither a decision nor an iteration ({exc})") from None
    return runs
