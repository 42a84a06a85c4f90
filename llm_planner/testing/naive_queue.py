"""The reference implementation's queue, for the scheduling-cost benchmark and the "same pick
as a full re-sort" test only (the planner never uses it): recompute every priority and sort
the whole queue on every decision."""

from llm_planner.domain.tuf import pud_from_latest_start
from llm_planner.sched.queues import QueueEntry, ReadyQueue, rank


class NaiveRebuildQueue(ReadyQueue):
    def _insert(self, entry: QueueEntry) -> None:
        pass

    def _discard(self, entry: QueueEntry) -> None:
        pass

    def priority(self, entry: QueueEntry, now_s: float) -> float:
        return pud_from_latest_start(entry.tuf, entry.latest_start_s, entry.gen_time_s, now_s)

    def best(self, now_s: float) -> QueueEntry | None:
        ranked = sorted(self._entries.values(), key=lambda e: rank(self.priority(e, now_s), e))
        return ranked[0] if ranked else None
