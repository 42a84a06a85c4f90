"""Task-level records: what arrives, what the robot is sent, and the utility accounting."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import IntEnum

from llm_planner.domain.calls import SkillCall
from llm_planner.domain.tuf import Tuf

MAX_INSTRUCTION_BYTES = 64 * 1024


class TaskState(IntEnum):
    # Same values as llm_planner_interfaces/msg/TaskStatus.
    QUEUED = 0
    GENERATING = 1
    SUSPENDED = 2
    EXECUTING = 3
    SUCCEEDED = 4
    FAILED = 5
    REJECTED = 6
    CANCELED = 7

    @property
    def terminal(self) -> bool:
        return self >= TaskState.SUCCEEDED


@dataclass(frozen=True)
class FollowUp:
    """What makes a task an error follow-up the planner made itself: the task whose robot
    failed a call, the task the chain began with, and how many follow-ups the chain holds."""

    of_task: str
    root_task: str
    attempt: int  # 1 for the first follow-up of a task
    failed_s: float  # when the robot reported the failure
    original_text: str  # the root task's text (scene and instruction)


@dataclass(frozen=True)
class TaskRequest:
    task_id: str
    robot_id: str
    robot_type: str
    instruction: str
    urgency_name: str  # the urgency level's name
    tuf: Tuf
    arrival_s: float
    recorded_plan: str | None = None  # the plan recorded for this instruction, replayed by the sim engine
    label: str = ""  # task type for reports (e.g. the trace name)
    follow_up: FollowUp | None = None  # an error follow-up made by the planner (planning/replan.py)


@dataclass
class DispatchedSegment:
    index: int
    text: str
    calls: list[SkillCall]
    unit_calls: list[int]  # calls per utility unit (one unit per segmenter segment with calls)
    last: bool
    dispatched_s: float
    started_s: float = math.nan
    finished_s: float = math.nan
    call_times_s: list[float] = field(default_factory=list)

    @property
    def call_texts(self) -> list[str]:
        return [c.text for c in self.calls]


@dataclass
class StatusUpdate:
    task_id: str
    robot_id: str
    state: TaskState
    time_s: float
    segment_index: int = 0
    segment_text: str = ""
    message: str = ""
    response_time_s: float = math.nan
    waiting_time_s: float = math.nan
    utility: float = math.nan


@dataclass
class TaskRecord:
    """Everything measured about one task; the source of every metric and plot."""

    request: TaskRequest
    state: TaskState = TaskState.QUEUED
    message: str = ""
    plan: str = ""
    segments: list[DispatchedSegment] = field(default_factory=list)
    gen_intervals: list[tuple[float, float]] = field(default_factory=list)
    first_token_s: float = math.nan
    plan_done_s: float = math.nan
    finished_s: float = math.nan
    # utility accounting, filled as the robot reports executed segments
    response_time_s: float = math.nan
    waiting_time_s: float = 0.0
    utility: float = 0.0
    max_utility: float = 0.0
    units_executed: int = 0
    last_unit_end_s: float = math.nan
    robot_failure: str = ""  # what the robot failed, when it failed a call of this task
    followed_by: str = ""  # the error follow-up the planner made for it

    def account_segment(self, segment: DispatchedSegment) -> None:
        """Add the utility of the units this executed segment holds.

        Unit 0 earns TUF_0 of the response time (arrival -> its first call starts); each later
        unit earns TUF_1 of how long the robot waited between the previous unit's end and its
        start. The robot's idle time waiting for the planner adds up to the waiting time.
        """
        tuf = self.request.tuf
        t = segment.started_s
        times = iter(segment.call_times_s)
        for n_calls in segment.unit_calls:
            durations = [next(times, 0.0) for _ in range(n_calls)]
            start, end = t, t + sum(durations)
            if self.units_executed == 0:
                wait = start - self.request.arrival_s
                self.response_time_s = wait
                self.utility += tuf.utility(wait)
            else:
                wait = max(0.0, start - self.last_unit_end_s)
                self.utility += tuf.resumed().utility(wait)
            self.waiting_time_s += wait
            self.max_utility += tuf.beta
            self.units_executed += 1
            self.last_unit_end_s = end
            t = end
