"""What the planner prices its decisions with: G, the generation time a queue entry is due
by (a segment's, or under rtlm the rest of the plan's), the step time of the batch the queue
fills, and the hold's outlook on a plan's segments to come."""

from __future__ import annotations

import math
from collections.abc import Iterable

from llm_planner.catalog.skills import SkillSet
from llm_planner.dispatch.release import EXEC_PERCENTILES, Outlook
from llm_planner.engine.base import Engine
from llm_planner.planning.generation import PlanGeneration
from llm_planner.planning.replicas import ReplicaSet
from llm_planner.planning.segment_lengths import SegmentLengths
from llm_planner.sched.policies import Behaviour
from llm_planner.sched.queues import ReadyQueue, bucket_gen_time

# Typical task prompt (scene + instruction; its skill set's system prompt is prefix-cached) and
# attended context, for the per-class estimate of a segment's generation time G.
TYPICAL_PROMPT_TOKENS = 100
_TYPICAL_CONTEXT_TOKENS = 1000
STEP_WEIGHT = 0.1  # of each iteration in the running mean of the engine's iteration time


class Estimates:
    def __init__(
        self,
        behaviour: Behaviour,
        replicas: ReplicaSet,
        queue: ReadyQueue,
        segment_lengths: SegmentLengths,
        max_batch: int,
        skill_sets: Iterable[SkillSet],
    ) -> None:
        """`skill_sets`: every configured one (G at batch 1 is a constant of each)."""
        self.behaviour = behaviour
        self.replicas = replicas
        # The replicas run one model with one profile: the first stands for all in estimates.
        self.engine = replicas[0].engine
        self.queue = queue
        self.segment_lengths = segment_lengths
        self.max_batch = max_batch
        # per replica: running mean of its real iteration time (prefills included)
        self.recent_step_s = [0.0] * len(replicas)
        self._fixed: dict[tuple[str, bool], float] = {}
        for skill_set in skill_sets:
            for first in (True, False):
                self._fixed.setdefault((skill_set.name, first), self._fixed_gen_time(skill_set, first))

    def observe_step(self, replica: int, elapsed_s: float) -> None:
        self.recent_step_s[replica] += STEP_WEIGHT * (elapsed_s - self.recent_step_s[replica])

    def gen_time(self, gen: PlanGeneration, first: bool) -> float:
        """G of the work the generation does next: the rest of its plan under rtlm, else its segment."""
        return (
            self._plan_gen_time(gen, first) if self.behaviour.prices_whole_plans else self._segment_gen_time(gen, first)
        )

    def _fixed_gen_time(self, skill_set: SkillSet, first: bool) -> float:
        """G: l_max tokens at batch 1."""
        return round(self.solo_gen_time(skill_set.segment_tokens, first), 6)

    def solo_gen_time(self, tokens: float, first: bool) -> float:
        """Time to generate `tokens` alone in the engine (+ the prompt's prefill if `first`)."""
        step = self.engine.predict_step_s(1, _TYPICAL_CONTEXT_TOKENS)
        prefill = self.engine.predict_step_s(1, _TYPICAL_CONTEXT_TOKENS, TYPICAL_PROMPT_TOKENS) - step if first else 0.0
        return prefill + tokens * step

    def _segment_gen_time(self, gen: PlanGeneration, first: bool) -> float:
        """G of the segment the generation works on next: its expected tokens at the running
        batch, on the queue's grid (with a predictor; else l_max at batch 1, the per-skill-set
        constant)."""
        if not self.segment_lengths.at_current_batch:
            return self._fixed[(gen.skill_set.name, first)]
        engine = self.engine_of(gen)
        running = engine.running
        joins = gen.task_id not in running
        batch = len(running) + joins
        context = sum(engine.context_tokens(g) for g in running) + joins * _TYPICAL_CONTEXT_TOKENS
        step = engine.predict_step_s(batch, context)
        prefill = engine.predict_step_s(batch, context, TYPICAL_PROMPT_TOKENS) - step if first else 0.0
        return bucket_gen_time(prefill + gen.expected_segment_tokens * step)

    def _plan_gen_time(self, gen: PlanGeneration, first: bool) -> float:
        """rtlm's G: the rest of the plan's predicted, uncertainty-priced tokens at batch 1 (RT-LM
        prices a request by its expected length alone, not by the batch it will share)."""
        return self.solo_gen_time(gen.priced_plan_tokens_left, first)

    def engine_of(self, gen: PlanGeneration) -> Engine:
        """The engine the generation's context is in; not yet placed: the one with the smallest batch."""
        if gen.replica is not None:
            return self.replicas[gen.replica].engine
        return min(self.replicas, key=lambda r: (len(r.engine.running), r.index)).engine

    def loaded_step_s(self, engine: Engine) -> float:
        """A decode step at the engine's running batch once its share of the queue has joined
        (up to the batch size), each queued generation at the running mean context: in a
        crowded engine the queue soon fills the batch the plan's next segments decode in."""
        running = engine.running
        context = sum(engine.context_tokens(g) for g in running)
        share = math.ceil(len(self.queue) / len(self.replicas))
        joining = max(0, min(self.max_batch - len(running), share))
        mean_context = context / len(running) if running else 0.0
        return engine.predict_step_s(max(1, len(running) + joining), int(context + joining * mean_context))

    def outlook(self, gen: PlanGeneration, now: float, switch_gap_s: float) -> Outlook:
        """What the release decision needs: the held units' expected execution (the mean and
        its spread over the exec model's quantiles) and the segments to come at the step time
        of the batch the queue fills."""
        req = gen.record.request
        # The profile's decode step at the batch the queue fills, or what the recent iterations
        # really took if more (prompts of new arrivals prefilled between decode steps).
        step = max(self.loaded_step_s(self.engine_of(gen)), self.recent_step_s[gen.replica or 0])
        first = gen.robot.calls == 0  # nothing sent yet: the held units start the plan
        robot_free = gen.robot.expected_free_s(now)
        held_exec_s = [gen.robot.duration(s.calls, "mean") for s in gen.held if s.calls]
        held_calls = [call for segment in gen.held for call in segment.calls]
        held_mean_s = sum(held_exec_s)
        return Outlook(
            now_s=now,
            robot_free_s=robot_free,
            held_exec_s=held_exec_s,
            ahead_gen_s=[tokens * step for tokens in self.segments_to_come(gen)],
            ahead_exec_s=gen.generated_exec_s / max(1, gen.segments_generated),
            switch_gap_s=switch_gap_s,
            first_tuf=req.tuf if first else req.tuf.resumed(),
            first_ref_s=req.arrival_s if first else robot_free,
            resumed_tuf=req.tuf.resumed(),
            exec_spread=tuple(gen.robot.duration(held_calls, f"q{p}") / held_mean_s for p in EXEC_PERCENTILES)
            if held_mean_s > 0
            else (1.0,),
        )

    def segments_to_come(self, gen: PlanGeneration) -> list[float]:
        """Expected tokens of each segment the plan still has: as the segment lengths list them,
        or, where they give only the next, that length for as many segments as its skill set's
        finished plans had left at this point (as many as it has, before any finished). Seeing
        one segment ahead, the hold releases a plan's held units as soon as they cover the next
        segment's generation, and where the engine writes slower than the robot acts, the robot
        waits before each unit after it."""
        if self.segment_lengths.plans_ahead:
            return gen.ahead_tokens
        return gen.ahead_tokens * gen.observed.segments_to_come(gen.skill_set.name, gen.call_segments)
