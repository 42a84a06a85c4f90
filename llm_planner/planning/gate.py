"""The safety gate at dispatch: each robot's rules (catalog/safety.py) applied to the segments
a task is about to send, and the approvals its calls wait for.

A segment with a call the rules stop is never sent: the task fails with the reason. A segment
with a call that needs approval waits, with every segment after it, until an operator
approves (then they go) or denies (the task fails); no answer within the robot's
`approval_timeout_s` counts as a denial. The wait counts against the task's utility like
any other: its units start later."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from llm_planner.catalog.safety import SafetyRules
from llm_planner.planning.segmenter import Segment


@dataclass(frozen=True)
class Verdict:
    stop: str = ""  # why the gate stops the task's segments
    wait_for: str = ""  # the call that waits for approval


@dataclass
class Waiting:
    robot_id: str
    call: str
    since_s: float
    timeout_s: float


class SafetyGate:
    def __init__(self, rules: Mapping[str, SafetyRules]) -> None:
        """`rules`: by robot id; robots without are not gated."""
        self.rules = dict(rules)
        self.waiting: dict[str, Waiting] = {}  # task id -> the approval it waits for
        self._approved: dict[str, int] = {}  # task id -> segments approved up to this index

    def of(self, robot_id: str) -> SafetyRules | None:
        return self.rules.get(robot_id)

    def check(self, task_id: str, robot_id: str, segments: list[Segment], now: float) -> Verdict:
        """May these segments go to the robot now?"""
        rules = self.rules.get(robot_id)
        if rules is None:
            return Verdict()
        for segment in segments:
            for call in segment.calls:
                reason = rules.violation(call)
                if reason:
                    return Verdict(stop=reason)
        if task_id in self.waiting:
            return Verdict(wait_for=self.waiting[task_id].call)
        approved = self._approved.get(task_id, -1)
        for segment in segments:
            if segment.index > approved:
                asks = next((c for c in segment.calls if rules.needs_approval(c)), None)
                if asks is not None:
                    self.waiting[task_id] = Waiting(robot_id, asks.text, now, rules.approval_timeout_s)
                    return Verdict(wait_for=asks.text)
        return Verdict()

    def approve(self, task_id: str, segments: list[Segment]) -> None:
        """The operator lets the waiting segments go (those held now)."""
        self.waiting.pop(task_id, None)
        self._approved[task_id] = max((s.index for s in segments), default=self._approved.get(task_id, -1))

    def expired(self, now: float) -> list[tuple[str, Waiting]]:
        return [(task_id, w) for task_id, w in self.waiting.items() if now - w.since_s >= w.timeout_s]

    def forget(self, task_id: str) -> None:
        self.waiting.pop(task_id, None)
        self._approved.pop(task_id, None)
