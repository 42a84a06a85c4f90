"""The order in which a robot runs the segments sent to it: the one rule that the ROS robot
server and the simulated robots both follow, so a live and a simulated robot cannot differ.

A robot runs one segment at a time: one task's segments in index order, and one task's plan
to its last segment before the next task's (the next task: the one whose next segment arrived
first). If the current task sends nothing for `hold_s` while another task waits, the robot
moves on (its planner may have given up on the first). Time is whatever clock the caller
runs on: the simulation's or the robot's monotonic clock.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Callable, Generic, TypeVar

# A robot in the middle of a task's plan waits this long for the task's next segment before it
# moves on to another task that waits.
TASK_HOLD_S = 5.0

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
    current: str | None = None  # the task whose plan the robot is in the middle of
    idle_since: float = 0.0
    _waiting: list[_Waiting[Item]] = field(default_factory=list)
    _tickets: itertools.count = field(default_factory=itertools.count)

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
        return self.idle_since + self.hold_s

    def finished(self, now: float, plan_ended: bool) -> None:
        """The running segment ended at `now`; with `plan_ended` (its task's last segment, a
        failure, a cancel) the robot is no longer in the middle of that plan."""
        self.idle_since = now
        if plan_ended:
            self.current = None

    def drop_current(self, task_id: str) -> None:
        """The task the robot is in the middle of was canceled between two segments."""
        if self.current == task_id:
            self.current = None
