"""One task's generation as the planner follows it: its request, segmenter, robot, place in
an engine, the tokens written and the estimates of those still to come (domain/tokens_left.py)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from llm_planner.catalog.skills import SkillSet
from llm_planner.dispatch.dispatcher import RobotWork
from llm_planner.domain.tasks import TaskRecord
from llm_planner.domain.tokens_left import plan_tokens_left, priced_plan_tokens_left, segment_tokens_left
from llm_planner.engine.base import Continuation, GenerationRequest
from llm_planner.planning.segment_lengths import ObservedSegments
from llm_planner.planning.segmenter import Segment, Segmenter
from llm_planner.sched.queues import QueueEntry


@dataclass(eq=False)  # one task's generation: equal only to itself (a field-by-field compare cost ms per batch)
class PlanGeneration:
    record: TaskRecord
    skill_set: SkillSet
    segmenter: Segmenter
    request: GenerationRequest
    robot: RobotWork  # what the robot was sent and when it is expected free
    in_engine: bool = False
    replica: int | None = None  # the engine replica it is placed on (its context is there while in_engine)
    run_started_s: float = math.nan
    seg_tokens: int = 0  # tokens generated since the last segment boundary
    tokens: int = 0  # tokens generated in all
    segments_generated: int = 0
    call_segments: int = 0  # of those, the ones with a skill call
    generated_exec_s: float = 0.0  # the generated segments' predicted execution time
    ahead_tokens: list[float] = field(default_factory=list)  # expected tokens of each segment to come
    plan_tokens: float = math.nan  # rtlm: the plan's predicted (uncertainty-priced) tokens, redone if outrun
    held: list[Segment] = field(default_factory=list)  # generated, not yet sent to the robot
    text_parts: list[str] = field(default_factory=list)
    deadline_s: float = math.inf  # when the segment being generated is due
    plan_done: bool = False
    truncated: bool = False  # the engine stopped the plan at its token limit
    entry: QueueEntry | None = None  # the scheduling entry of the segment being generated
    lost_context: Continuation | None = None  # its engine was lost: goes on from its text in another
    recovered: bool = False  # it already went on once after its engine was lost
    observed: ObservedSegments = field(default_factory=ObservedSegments)  # the planner's, shared by its generations

    @property
    def task_id(self) -> str:
        return self.record.request.task_id

    @property
    def expected_segment_tokens(self) -> float:
        """What the segment being generated is expected to take."""
        return self.ahead_tokens[0]

    @property
    def typical_segment_tokens(self) -> float:
        """What its segment typically takes: the expected length, or less if its skill set's
        segments have been shorter on average (l_max is an upper estimate)."""
        mean = self.observed.mean(self.skill_set.name)
        return self.expected_segment_tokens if mean is None else min(mean, self.expected_segment_tokens)

    @property
    def segment_tokens_left(self) -> float:
        return segment_tokens_left(self.expected_segment_tokens, self.seg_tokens)

    @property
    def plan_tokens_left(self) -> float:
        return plan_tokens_left(self.ahead_tokens, self.seg_tokens)

    @property
    def priced_plan_tokens_left(self) -> float:
        return priced_plan_tokens_left(self.plan_tokens, self.tokens)
