"""The order in which a robot runs the segments sent to it: the one rule that the ROS robot
server and the simulated robots both follow, so a live and a simulated robot cannot differ.

A robot runs one segment at a time: one task's segments in index order, and one task's plan
to its last segment before the next task's (the next task: the one whose next segment arrived
first). If the current task sends nothing for `hold_s` while another task waits, the robot
moves on (its planner may have given up on the first). After a failed call the robot waits
for the planner's error follow-up of that task (its id is known: domain/names.py), which
continues the plan, for up to FOLLOW_UP_HOLD_S before it moves on. Time is whatever clock the
caller runs on: the simulation's or the robot's monotonic clock.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from llm_planner.domain.names import next_follow_up_id

# A robot in the middle of a task's plan waits this long for the task's next segment before it
# moves on to another task that waits.
TASK_HOLD_S = 5.0
# After a failed call, how long the robot waits for the task's error follow-up (planned in well
# under a second on this project's engines) before it runs another task.
FOLLOW_UP_HOLD_S = 2.0

Item = TypeVar("Item")


@dataclass
class _Waiting(Generic[Item]):
    ticket: int  # arrival order
    task_id: str
    index: int
    item: Item


@dataclass
class RobotQueue(Generic[Item]):
    """Segments waiting on one robot, and which may run next. `Item` is the caller's handle of a
    segment (a goal, a dispatched segment)."""

    hold_s: float = TASK_HOLD_S
    current: str | None = None  # the task whose plan the robot is in the middle of (or whose follow-up it awaits)
    idle_since: float = 0.0
    _hold_for: float = field(init=False)
    _waiting: list[_Waiting[Item]] = field(default_factory=list)
    _tickets: itertools.count = field(default_factory=itertools.count)

    def __post_init__(self) -> None:
        self._hold_for = self.hold_s

    def add(self, task_id: str, index: int, item: Item) -> None:
        self._waiting.append(_Waiting(next(self._tickets), task_id, index, item))

    def __bool__(self) -> bool:
        return bool(self._waiting)

    def items(self) -> list[Item]:
        return [w.item for w in self._waiting]

    def remove_if(self, drop: Callable[[Item], bool]) -> list[Item]:
        """Take out the waiting segments `drop` selects, in arrival order."""
        dropped = [w.item for w in self._waiting if drop(w.item)]
        self._waiting = [w for w in self._waiting if not drop(w.item)]
        return dropped

    def remove_task(self, task_id: str) -> None:
        self._waiting = [w for w in self._waiting if w.task_id != task_id]

    def pick(self, now: float) -> Item | None:
        """Take out the segment to run now, or None if none may run yet."""
        heads: dict[str, _Waiting[Item]] = {}
        for w in self._waiting:  # per task, the lowest index first
            if w.task_id not in heads or w.index < heads[w.task_id].index:
                heads[w.task_id] = w
        if not heads:
            return None
        chosen = heads.get(self.current) if self.current is not None else None
        if chosen is None:
            if self.current is not None and now < self.hold_ends_s():
                return None
            chosen = min(heads.values(), key=lambda w: w.ticket)
        self._waiting.remove(chosen)
        self.current = chosen.task_id
        return chosen.item

    def hold_ends_s(self) -> float:
        """When the robot stops waiting for its current task's next segment."""
        return self.idle_since + self._hold_for

    def finished(self, now: float, plan_ended: bool, call_failed: bool = False) -> None:
        """The running segment ended at `now`; with `plan_ended` (its task's last segment, a
        failure, a cancel) the robot is no longer in the middle of that plan. With
        `call_failed` (a call of it failed) the robot awaits the task's error follow-up."""
        self.idle_since = now
        self._hold_for = self.hold_s
        if call_failed and self.current is not None:
            self.current = next_follow_up_id(self.current)
            self._hold_for = min(self.hold_s, FOLLOW_UP_HOLD_S)
        elif plan_ended:
            self.current = None

    def drop_current(self, task_id: str) -> None:
        """The task the robot is in the middle of was canceled between two segments."""
        if self.current == task_id:
            self.current = None
