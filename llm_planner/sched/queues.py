"""The ready queues the scheduling policies (sched/policies.py) order generations in.

A ready queue holds the generations waiting for their next segment and answers "which one
next?" at a given time without rebuilding or re-sorting itself:

- StaticQueue (fcfs, edf, vllm, vllm-stream, rtlm): the key never changes, a sorted list.
  rtlm's key is RT-LM's uncertainty-aware order adapted to deadlines: the main lane before
  the offload lane (plans predicted huge), then the first deadline plus the predicted,
  uncertainty-inflated generation time (G), smallest first. A waiting entry's key stays, so
  a later, shorter task overtakes it only while its deadline and G add up to less.
- PudQueue (timely): PUD priority changes with time, but within one class of entries that
  share TUF and estimated generation time G, the order is fixed by the latest full-utility
  start D = ref + ERT - G: on-time entries (D > now) rank by smallest D, late ones by largest D
  (least decayed). So each class is a list sorted by D and only the entries next to `now`
  (plus the oldest, for ties at zero utility) can be best: O(classes x log n) per decision.
  PUD alone lets a segment whose utility is lost wait as long as anything with utility left
  arrives; with `lost_wait_s` (timely's bound_wait), a segment lost for that long goes before
  all others, the longest lost first, but for one that can still earn utility and is more
  important (larger beta) or due to start within the lost one's G. Within a class the longest
  lost is the first entry.

Ties in priority (zero above all: segments that can no longer earn utility) go to the more
important TUF (larger beta: an urgent task before a normal one), then to the earlier deadline,
then to the earlier entry.
"""

from __future__ import annotations

import itertools
import math
from abc import ABC, abstractmethod
from dataclasses import dataclass, field

from sortedcontainers import SortedKeyList

from llm_planner.domain.tuf import MIN_SLACK_S, Tuf, latest_start, pud_from_latest_start

_seq = itertools.count()

# A predicted G (per task, at the running batch) would make every entry a class of its own and
# PudQueue's pick linear in the queue; on this grid a few dozen classes cover 10 ms to 10 s. A
# step of 19% is well inside the length predictor's own error.
G_BUCKET_RATIO = 2**0.25


def bucket_gen_time(gen_time_s: float) -> float:
    """A predicted generation time rounded to the nearest point of a geometric grid."""
    if gen_time_s <= 0:
        return gen_time_s
    return G_BUCKET_RATIO ** round(math.log(gen_time_s, G_BUCKET_RATIO))


@dataclass(frozen=True, slots=True)
class QueueEntry:
    gen_id: str
    tuf: Tuf  # TUF_0 for the first segment, TUF_1 for resumed ones
    ref_s: float  # arrival, or the estimated end of the previous segment's execution
    gen_time_s: float  # estimated generation time G of the segment
    arrival_s: float  # the task's arrival
    first_deadline_s: float  # arrival + ERT of the task's TUF_0
    lane: int = 0  # rtlm: 1 for plans predicted huge (offloaded: after every entry of lane 0)
    seq: int = field(default_factory=lambda: next(_seq))

    @property
    def deadline_s(self) -> float:
        return self.ref_s + self.tuf.ert_s

    @property
    def latest_start_s(self) -> float:
        return latest_start(self.tuf, self.ref_s, self.gen_time_s)

    def utility_lost(self, done_s: float, delayed_s: float) -> float:
        """What the segment's unit earns less when it is done at `delayed_s` instead of `done_s`."""
        return self.tuf.utility(done_s - self.ref_s) - self.tuf.utility(delayed_s - self.ref_s)


class ReadyQueue(ABC):
    def __init__(self) -> None:
        self._entries: dict[str, QueueEntry] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, gen_id: str) -> bool:
        return gen_id in self._entries

    def get(self, gen_id: str) -> QueueEntry | None:
        return self._entries.get(gen_id)

    def push(self, entry: QueueEntry) -> None:
        if entry.gen_id in self._entries:
            self.remove(entry.gen_id)
        self._entries[entry.gen_id] = entry
        self._insert(entry)

    def remove(self, gen_id: str) -> QueueEntry | None:
        entry = self._entries.pop(gen_id, None)
        if entry is not None:
            self._discard(entry)
        return entry

    def pop_best(self, now_s: float) -> QueueEntry | None:
        entry = self.best(now_s)
        if entry is not None:
            self.remove(entry.gen_id)
        return entry

    def in_order(self, now_s: float) -> list[QueueEntry]:
        """Every entry, in the order `best` would give them (the queue is left as it was)."""
        taken = []
        while (entry := self.pop_best(now_s)) is not None:
            taken.append(entry)
        for entry in taken:
            self._entries[entry.gen_id] = entry
            self._insert(entry)
        return taken

    @abstractmethod
    def best(self, now_s: float) -> QueueEntry | None: ...

    @abstractmethod
    def priority(self, entry: QueueEntry, now_s: float) -> float:
        """Larger runs first."""

    @abstractmethod
    def _insert(self, entry: QueueEntry) -> None: ...

    @abstractmethod
    def _discard(self, entry: QueueEntry) -> None: ...


class QueueShare:
    """Some of a queue's entries, in its order, as one engine replica's batch controller sees
    them (the entries placed on it); taking one takes it from the queue."""

    def __init__(self, queue: ReadyQueue, entries: list[QueueEntry]) -> None:
        self._queue = queue
        self._entries = entries

    def in_order(self, now_s: float) -> list[QueueEntry]:
        return list(self._entries)

    def priority(self, entry: QueueEntry, now_s: float) -> float:
        return self._queue.priority(entry, now_s)

    def remove(self, gen_id: str) -> QueueEntry | None:
        self._entries = [e for e in self._entries if e.gen_id != gen_id]
        return self._queue.remove(gen_id)


LANE_GAP_S = 1e9  # what a lane costs in priority (seconds): more than any deadline apart

_STATIC_KEYS = {
    "arrival": lambda e: e.arrival_s,
    "first_deadline": lambda e: e.first_deadline_s,
    "rtlm": lambda e: e.lane * LANE_GAP_S + e.first_deadline_s + e.gen_time_s,
}


class StaticQueue(ReadyQueue):
    """Priority fixed at push time: by arrival (FCFS), by first deadline (EDF) or by lane,
    first deadline and predicted generation time (rtlm)."""

    def __init__(self, by: str) -> None:
        super().__init__()
        if by not in _STATIC_KEYS:
            raise ValueError(f"unknown static key {by!r}")
        value = _STATIC_KEYS[by]
        self._key = lambda e: (value(e), e.seq)
        self._sorted = SortedKeyList(key=self._key)

    def _insert(self, entry: QueueEntry) -> None:
        self._sorted.add(entry)

    def _discard(self, entry: QueueEntry) -> None:
        self._sorted.remove(entry)

    def best(self, now_s: float) -> QueueEntry | None:
        return self._sorted[0] if self._sorted else None

    def priority(self, entry: QueueEntry, now_s: float) -> float:
        return -self._key(entry)[0]


def rank(priority: float, entry: QueueEntry) -> tuple[float, float, float, int]:
    """Sort key: higher priority, then larger beta, then earlier deadline, then earlier entry."""
    return (-priority, -entry.tuf.beta, entry.deadline_s, entry.seq)


class PudQueue(ReadyQueue):
    """TimelyLLM's PUD order, exact, without re-evaluating every entry (see module doc)."""

    def __init__(self, lost_wait_s: float = math.inf) -> None:
        super().__init__()
        self._classes: dict[tuple, SortedKeyList] = {}
        self.lost_wait_s = lost_wait_s

    @staticmethod
    def _class_key(entry: QueueEntry) -> tuple:
        return (entry.tuf.beta, entry.tuf.ert_s, entry.tuf.cutoff_s, entry.gen_time_s)

    def _insert(self, entry: QueueEntry) -> None:
        key = self._class_key(entry)
        members = self._classes.get(key)
        if members is None:
            members = self._classes[key] = SortedKeyList(key=lambda e: (e.latest_start_s, e.seq))
        members.add(entry)

    def _discard(self, entry: QueueEntry) -> None:
        key = self._class_key(entry)
        members = self._classes[key]
        members.remove(entry)
        if not members:
            del self._classes[key]

    def priority(self, entry: QueueEntry, now_s: float) -> float:
        return pud_from_latest_start(entry.tuf, entry.latest_start_s, entry.gen_time_s, now_s)

    @staticmethod
    def lost_since_s(entry: QueueEntry) -> float:
        """From when the segment can earn no utility: it would end after its cutoff."""
        return entry.latest_start_s + entry.tuf.cutoff_s - entry.tuf.ert_s

    def _longest_lost(self, now_s: float) -> QueueEntry | None:
        """The segment lost for longest, if it has been lost for `lost_wait_s`."""
        firsts = [members[0] for members in self._classes.values()]
        due = [e for e in firsts if now_s - self.lost_since_s(e) >= self.lost_wait_s]
        return min(due, key=lambda e: (self.lost_since_s(e), e.seq), default=None)

    def best(self, now_s: float) -> QueueEntry | None:
        best = self._best_by_pud(now_s)
        if best is None or self.lost_wait_s == math.inf:
            return best
        starved = self._longest_lost(now_s)
        if starved is None or starved is best:
            return best
        if self.priority(best, now_s) > 0 and (
            best.tuf.beta > starved.tuf.beta or best.latest_start_s - now_s < starved.gen_time_s
        ):
            # a more important segment that can still earn utility goes first, and so does one
            # that would lose utility by waiting for the starved one's generation
            return best
        return starved

    def _best_by_pud(self, now_s: float) -> QueueEntry | None:
        best_entry, best_rank = None, None
        for members in self._classes.values():
            n = len(members)
            on_time = members.bisect_key_right((now_s + MIN_SLACK_S, float("inf")))
            plateau = members.bisect_key_left((now_s, -1))
            candidates = {0, on_time - 1, on_time, on_time + 1, plateau - 1, plateau, plateau + 1}
            if 0 < plateau <= n:
                # The least-decayed late entry: the first of those sharing the largest D < now.
                candidates.add(members.bisect_key_left((members[plateau - 1].latest_start_s, -1)))
            for i in candidates:
                if 0 <= i < n:
                    entry = members[i]
                    entry_rank = rank(self.priority(entry, now_s), entry)
                    if best_rank is None or entry_rank < best_rank:
                        best_entry, best_rank = entry, entry_rank
        return best_entry
