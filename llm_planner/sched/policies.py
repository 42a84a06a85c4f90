"""The scheduling policies: what each does (delivery, preemption, order, lengths) and the
planner's behaviour under it with the config's feature switches (`Behaviour`)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from llm_planner.domain.policy import PolicyName
from llm_planner.sched.queues import PudQueue, ReadyQueue, StaticQueue
from llm_planner.settings.config import FeaturesConfig


class Delivery(StrEnum):
    WHOLE_PLAN = "whole-plan"  # the plan goes to the robot once it is all generated
    SEGMENTS = "segments"  # each segment goes to the robot as soon as it is generated


class Preemption(StrEnum):
    NEVER = "never"  # a generation stays in the batch until its plan is done
    AFTER_EACH_SEGMENT = "after-each-segment"  # it leaves the batch after every segment, resumed when due
    WHEN_NEEDED = "when-needed"  # it leaves the batch only when the batch controller needs its place


class Order(StrEnum):
    PUD = "pud"  # potential utility density
    ARRIVAL = "arrival"
    FIRST_DEADLINE = "first_deadline"
    RTLM = "rtlm"  # RT-LM: predicted plan size and its uncertainty, huge plans in a lower lane


class Lengths(StrEnum):
    FIXED = "fixed"  # G from the skill set's longest segment
    PREDICTED = "predicted"  # G and the batch controller use the configured length predictor
    PREDICTED_PLAN = "predicted-plan"  # RT-LM: whole plans priced by predicted size and uncertainty


@dataclass(frozen=True)
class Behaviour:
    """What the planner does under a policy with the config's feature switches: each a question
    the planner asks, answered once."""

    streams_segments: bool
    preemptive: bool  # generations can leave the batch and resume later
    pauses_after_segment: bool
    holds_segments: bool  # hold a segment back when streaming it would leave the robot waiting later
    shrinks_batch: bool  # suspend generations that can wait so an urgent segment decodes at a small batch
    latency_guided: bool  # admit only while running deadlines hold (TimelyLLM 4.4)
    guards_by_importance: bool  # ...unless waiting costs the newcomer more; none preempted by a less important one
    predicted_lengths: bool
    prices_whole_plans: bool  # RT-LM's pricing, offload lane and consolidation
    lost_wait_s: float = math.inf  # a segment lost for this long goes first (PudQueue)


@dataclass(frozen=True, kw_only=True)
class Policy:
    name: PolicyName
    description: str
    delivery: Delivery
    preemption: Preemption
    order: Order
    latency_guided: bool = False
    lengths: Lengths = Lengths.FIXED
    # What `timely` adds to the TimelyLLM paper (each can be switched off in the planner config):
    hold: bool = False
    shrink: bool = False
    bound_wait: bool = False
    # latency-guided admission holds a newcomer back only if it loses nothing by waiting, or less than the
    # running at least as important lose in its company; preemption suspends no running generation for a
    # less important one
    guard_by_importance: bool = False

    def make_queue(self, behaviour: Behaviour | None = None) -> ReadyQueue:
        if self.order == Order.PUD:
            return PudQueue(behaviour.lost_wait_s if behaviour is not None else math.inf)
        return StaticQueue(self.order.value)

    def behaviour(self, features: FeaturesConfig, latency_guided_batches: bool = True) -> Behaviour:
        preemptive = self.preemption != Preemption.NEVER
        keeps_running = self.preemption == Preemption.WHEN_NEEDED and features.keep_running
        return Behaviour(
            streams_segments=self.delivery == Delivery.SEGMENTS,
            preemptive=preemptive,
            pauses_after_segment=preemptive and not keeps_running,
            holds_segments=self.hold and features.hold,
            shrinks_batch=self.shrink and features.shrink,
            latency_guided=self.latency_guided and latency_guided_batches,
            guards_by_importance=self.guard_by_importance and features.importance_guard,
            predicted_lengths=self.lengths != Lengths.FIXED,
            prices_whole_plans=self.lengths == Lengths.PREDICTED_PLAN,
            lost_wait_s=features.lost_wait_s if self.bound_wait and features.bound_wait else math.inf,
        )


_PAPER: dict[str, Any] = dict(delivery=Delivery.SEGMENTS, preemption=Preemption.AFTER_EACH_SEGMENT, latency_guided=True)
POLICIES: dict[PolicyName, Policy] = {
    p.name: p
    for p in (
        Policy(
            name=PolicyName.TIMELY,
            order=Order.PUD,
            delivery=Delivery.SEGMENTS,
            preemption=Preemption.WHEN_NEEDED,
            latency_guided=True,
            lengths=Lengths.PREDICTED,
            hold=True,
            shrink=True,
            bound_wait=True,
            guard_by_importance=True,
            description="segmented generation, PUD priority with a bound on waiting once utility is lost, "
            "latency-guided admission that weighs what the running and the newcomer lose, "
            "utility-aware hold/stream dispatch, no pause after a segment, batch shrinking, segment "
            "lengths from the configured predictor",
        ),
        Policy(
            name=PolicyName.TIMELYLLM_PAPER,
            order=Order.PUD,
            **_PAPER,
            description="the TimelyLLM paper: segmented generation, PUD priority with a fixed G per segment, "
            "latency-guided admission, every segment streamed and the generation paused after it",
        ),
        Policy(
            name=PolicyName.FCFS,
            order=Order.ARRIVAL,
            **_PAPER,
            description="the paper's mechanics, first-come-first-served, first segment's priority kept",
        ),
        Policy(
            name=PolicyName.EDF,
            order=Order.FIRST_DEADLINE,
            **_PAPER,
            description="the paper's mechanics, earliest first deadline, first segment's priority kept",
        ),
        Policy(
            name=PolicyName.VLLM,
            order=Order.ARRIVAL,
            delivery=Delivery.WHOLE_PLAN,
            preemption=Preemption.NEVER,
            description="FCFS continuous batching; the whole plan is generated, then executed",
        ),
        Policy(
            name=PolicyName.VLLM_STREAM,
            order=Order.ARRIVAL,
            delivery=Delivery.SEGMENTS,
            preemption=Preemption.NEVER,
            description="FCFS continuous batching; each skill is sent when generated, no pausing",
        ),
        Policy(
            name=PolicyName.RTLM,
            order=Order.RTLM,
            delivery=Delivery.WHOLE_PLAN,
            preemption=Preemption.NEVER,
            lengths=Lengths.PREDICTED_PLAN,
            description="RT-LM: whole plans, shortest predicted (uncertainty-inflated) plan before its deadline "
            "first, predicted-huge plans in a lower lane, batches of similar predicted length",
        ),
    )
}
assert set(POLICIES) == set(PolicyName), "every policy name has a policy"


def get_policy(name: str) -> Policy:
    try:
        return POLICIES[PolicyName(name)]
    except ValueError:
        raise ValueError(f"unknown policy {name!r}; choose from {', '.join(POLICIES)}") from None
