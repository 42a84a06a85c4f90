"""What is sent to a robot (when: dispatch/release.py decides).

Completed segments become one DispatchedSegment (their calls and utility units) and go to the
robot's port. Per task, `RobotWork` is the one place that predicts when the robot will be free
(the end of its dispatched work, by the execution-time model, corrected by the robot's
reports): a suspended generation's next segment is due then.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from llm_planner.catalog.exec_model import ExecModel
from llm_planner.catalog.skills import SkillSet
from llm_planner.dispatch.robot_port import RobotPort
from llm_planner.domain.calls import SkillCall
from llm_planner.domain.tasks import DispatchedSegment, TaskRecord


class PlanPiece(Protocol):
    """A generated piece of a plan: its text and the skill calls in it."""

    text: str
    calls: list[SkillCall]


SWITCH_GAP_WEIGHT = 0.2  # of each new report in the running mean of the switch gap


@dataclass
class RobotWork:
    """One task's work at its robot."""

    exec_model: ExecModel
    stat: str  # the exec-time statistic that predicts a segment's end (min, mean, qNN)
    free_s: float = -math.inf  # when the robot is expected to finish what it was sent (by `stat`)
    mean_free_s: float = -math.inf  # the same by the mean (what expected utility is priced with)
    outstanding: int = 0  # dispatched segments not reported finished yet
    calls: int = 0  # skill calls dispatched in all

    def duration(self, calls: list[SkillCall], stat: str | None = None) -> float:
        """Predicted execution time of these calls (by `stat`, default the configured one)."""
        return self.exec_model.estimate_calls(calls, stat or self.stat)

    def expected_free_s(self, now: float) -> float:
        """When the robot is expected to be free (by the mean): not before now while it has
        not reported its last dispatched segment finished."""
        return max(self.mean_free_s, now) if self.outstanding else self.mean_free_s

    def sent(self, calls: list[SkillCall], now: float) -> None:
        """Queued behind whatever the robot still has to do."""
        self.calls += len(calls)
        self.outstanding += 1
        self.free_s = max(now, self.free_s) + self.duration(calls)
        self.mean_free_s = max(now, self.mean_free_s) + self.duration(calls, "mean")

    def started(self, calls: list[SkillCall], t: float) -> None:
        """The robot started its last dispatched segment at t."""
        self.free_s = t + self.duration(calls)
        self.mean_free_s = t + self.duration(calls, "mean")

    def finished(self, t: float, was_last: bool) -> None:
        self.outstanding -= 1
        if was_last:
            self.free_s = self.mean_free_s = t  # idle now: the next segment is due now


class Dispatcher:
    """Sends segments to robots and applies the robots' reports to each task's RobotWork.

    `whole_plan_units`: for policies that send the whole plan at once (the vLLM baselines),
    how to split it into the units utility is counted in (the segments segmented policies
    would have sent); None for segmented policies, where each segment of a dispatch is one unit.

    `switch_gap_s`: how long a robot is seen to wait between two dispatches of a task when the
    second was already waiting in its queue (its own switch time and the reporting jitter of
    its port; 0 for simulated robots), a running mean of the robots' reports. Each separate
    dispatch costs the next unit that wait, so the release decision prices it."""

    def __init__(
        self,
        robots: RobotPort,
        on_executing: Callable[[TaskRecord, DispatchedSegment], None],
        whole_plan_units: Callable[[SkillSet, str], Sequence[PlanPiece]] | None = None,
    ) -> None:
        self.robots = robots
        self.on_executing = on_executing
        self.whole_plan_units = whole_plan_units
        self.switch_gap_s = 0.0

    def send(
        self,
        record: TaskRecord,
        skill_set: SkillSet,
        work: RobotWork,
        segments: Sequence[PlanPiece],
        last: bool,
        now: float,
    ) -> None:
        """Send one or more consecutive segments as one dispatch; each segment with calls
        stays its own utility unit (held-back segments are counted as if streamed)."""
        text = "".join(s.text for s in segments)
        calls = [c for s in segments for c in s.calls]
        parts = segments if self.whole_plan_units is None else self.whole_plan_units(skill_set, text)
        unit_calls = [len(s.calls) for s in parts if s.calls]
        dispatched = DispatchedSegment(len(record.segments), text, calls, unit_calls, last, now)
        record.segments.append(dispatched)
        if not calls and not (last and work.calls):
            # Trailing text without a skill call (e.g. `->True`): nothing for the robot to do.
            # (The last segment of a plan still goes: the robot learns the plan has ended.)
            dispatched.started_s = dispatched.finished_s = now
            return
        work.sent(calls, now)
        self.on_executing(record, dispatched)
        self.robots.dispatch(record.request.robot_id, record.request.task_id, dispatched)

    def cancel(self, record: TaskRecord, work: RobotWork) -> None:
        if work.outstanding > 0:
            self.robots.cancel(record.request.robot_id, record.request.task_id)

    @staticmethod
    def started(record: TaskRecord, work: RobotWork, index: int, t: float) -> bool:
        """A robot report: segment `index` started. True if the robot's free time moved."""
        segment = record.segments[index]
        segment.started_s = t
        if index != len(record.segments) - 1:
            return False
        work.started(segment.calls, t)
        return True

    def finished(self, record: TaskRecord, work: RobotWork, index: int, call_times_s: list[float], t: float) -> bool:
        """A robot report: segment `index` ended. True if the robot's free time moved."""
        segment = record.segments[index]
        segment.finished_s = t
        segment.call_times_s = list(call_times_s)
        if math.isnan(segment.started_s):
            segment.started_s = t - sum(call_times_s)
        previous = record.segments[index - 1] if index else None
        if (
            previous is not None
            and segment.calls
            and previous.call_times_s
            and segment.dispatched_s < previous.finished_s
        ):
            gap = max(0.0, segment.started_s - (previous.started_s + sum(previous.call_times_s)))
            self.switch_gap_s += SWITCH_GAP_WEIGHT * (gap - self.switch_gap_s)
        last = index == len(record.segments) - 1
        work.finished(t, last)
        return last
