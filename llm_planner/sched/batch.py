"""Batch controller: which queued generations join the engine's batch, and when.

- at most `max_batch_size` generations run at once, and a new one needs KV space;
- latency-guided admission (TimelyLLM 4.4): a generation is admitted only if every running
  generation that can still make its deadline still finishes its segment in time with the
  bigger batch (and the newcomer's prefill in the next iteration). Candidates are taken in
  priority order and admission stops at the first that does not fit, so a lower-priority
  generation never overtakes a higher-priority one;
- preemption (suspending policies): with a full batch, a better queued generation replaces
  the lowest-priority running one, which keeps its context and waits in the queue.
"""

from __future__ import annotations

import math
from typing import Protocol

from llm_planner.engine.base import Engine, GenerationRequest
from llm_planner.sched.queues import QueueEntry, ReadyQueue
from llm_planner.settings.config import BatchConfig


class Generation(Protocol):
    """What the batch controller reads of a planner's generation."""

    task_id: str
    request: GenerationRequest
    entry: QueueEntry | None
    in_engine: bool  # its context is in the engine (a resume, no prompt prefill)
    seg_tokens: int  # tokens generated since its last segment boundary
    expected_segment_tokens: float  # what its current segment is expected to take
    deadline_s: float  # when its current segment is due


class BatchController:
    def __init__(self, config: BatchConfig, engine: Engine, latency_guided: bool, preemptive: bool) -> None:
        self.max_batch_size = config.max_batch_size
        self.latency_guided = latency_guided
        self.preemptive = preemptive
        self.engine = engine
        self.deferred = 0  # admissions postponed to protect a running generation's deadline

    def select(self, queue: ReadyQueue, running: list[Generation], gens: dict[str, Generation],
               now: float) -> tuple[list[QueueEntry], list[Generation]]:
        """Entries to admit, in order, and running generations to suspend to make room.

        With a full batch, a queued generation whose priority beats the lowest-priority
        running one takes its place; that one keeps its context and returns to the queue
        (so an urgent first segment never waits for a batch slot)."""
        admitted: list[QueueEntry] = []
        preempted: list[Generation] = []
        batch = list(running)
        victims = list(running)  # only generations that were running before this decision
        context = sum(self.engine.context_tokens(g.task_id) for g in batch)
        prefill_total = 0  # prompts admitted in this decision are all prefilled next iteration
        resumes = 0
        kv_free = self.engine.kv_free_tokens()
        while queue:
            entry = queue.best(now)
            gen = gens[entry.gen_id]
            victim = None
            if len(batch) >= self.max_batch_size:
                if not self.preemptive or not victims:
                    break
                victim = min(victims, key=lambda g: queue.priority(g.entry, now))
                if queue.priority(entry, now) <= queue.priority(victim.entry, now):
                    break
            if gen.in_engine:
                prefill, new_context = 0, self.engine.context_tokens(gen.task_id)
                kv_needed = math.ceil(gen.expected_segment_tokens)
            else:
                prefill = self.engine.prompt_tokens(gen.request)
                new_context, kv_needed = prefill, prefill + math.ceil(gen.expected_segment_tokens)
            if kv_needed > kv_free:
                break
            base = [g for g in batch if g is not victim]
            base_context = context - (self.engine.context_tokens(victim.task_id) if victim else 0)
            if self.latency_guided and not self._keeps_deadlines(
                    base, base_context + new_context, prefill_total + prefill, resumes + int(gen.in_engine), now):
                self.deferred += 1
                break
            if victim is not None:
                victims.remove(victim)
                preempted.append(victim)
            queue.remove(entry.gen_id)
            admitted.append(entry)
            batch = base + [gen]
            context = base_context + new_context
            prefill_total += prefill
            resumes += int(gen.in_engine)
            kv_free -= kv_needed
        return admitted, preempted

    def _keeps_deadlines(self, batch: list[Generation], context: int, prefill: int, resumes: int,
                         now: float) -> bool:
        """False if admitting would make a running generation miss a deadline it would
        otherwise meet (one that misses anyway does not block admissions)."""
        step_now = self.engine.predict_step_s(len(batch), context)
        step = self.engine.predict_step_s(len(batch) + 1, context)
        first = self.engine.predict_step_s(len(batch) + 1, context, prefill, resumes)
        for gen in batch:
            slack = gen.deadline_s - now
            remaining = max(1, math.ceil(gen.expected_segment_tokens) - gen.seg_tokens)
            if remaining * step_now < slack <= first + (remaining - 1) * step:
                return False
        return True
