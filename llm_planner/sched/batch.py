"""Batch controller: which queued generations join the engine's batch, and when.

- at most `max_batch_size` generations run at once, and a new one needs KV space;
- latency-guided admission (TimelyLLM 4.4): a generation is admitted only if every running
  generation that can still make its deadline still finishes its segment in time with the
  bigger batch (and the newcomer's prefill in the next iteration). Candidates are taken in
  priority order and admission stops at the first that does not fit, so a lower-priority
  generation never overtakes a higher-priority one. `timely` weighs the newcomer against the
  running segments its company would cost utility (those already late but still earning
  too), each segment priced at its typical length (the newcomer's at the batch it will
  decode in, once the shrink has made room for it), and importance first: it holds the
  newcomer back if waiting for them costs it nothing, or less than the ones at least as
  important lose; what less important segments lose never holds back a newcomer that loses
  by waiting (an urgent task never waits on normal ones' utility). A newcomer it holds back
  holds back no one else: each queued generation is weighed in turn;
- preemption (suspending policies): with a full batch, a better queued generation replaces
  the lowest-priority running one, which keeps its context and waits in the queue (`timely`:
  never a more important one that would lose utility by waiting, its segment priced at its
  typical length: priced at l_max, a short urgent segment may look lost; and never for a
  newcomer at most as important whose segment would end past its cutoff at this batch's
  step time anyway);
- shrinking (`timely`): while a more important generation (larger TUF beta: an urgent task)
  decodes, less important ones that can afford to wait for it without losing utility (their
  robots are busy long enough, or their segment's utility is already lost) are suspended if
  running, and kept out if queued, while their company would cost it utility (its segment
  priced at its skill set's typical length), so the important one decodes at a small batch's
  step time. The rule holds for whichever generation is the most important one running whose
  segment still earns (one already lost gains nothing): a newcomer is not prefilled beside
  an urgent segment only to be suspended the next iteration, and one kept out for a segment
  that ends stays out while it would slow the next. They join once no more important
  segment would earn less in their company;
- consolidation (`rtlm`, RT-LM's dynamic consolidation): at most b generations, and one joins
  a running batch only if its `priced_plan_tokens_left` is within a factor e^lambda of the
  batch's median, so generations of similar length run together.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from llm_planner.domain.decisions import DecisionTrace, Kind, Reason
from llm_planner.domain.tokens_left import segment_tokens_left
from llm_planner.engine.base import Engine, GenerationRequest
from llm_planner.sched.queues import QueueEntry, QueueShare, ReadyQueue
from llm_planner.settings.config import BatchConfig, RtlmConfig


class BatchMember(Protocol):
    """What the batch controller reads of a planner's generation."""

    @property
    def task_id(self) -> str: ...
    @property
    def request(self) -> GenerationRequest: ...

    entry: QueueEntry | None
    in_engine: bool  # its context is in an engine (a resume there, no prompt prefill)
    replica: int | None  # the replica that engine is
    tokens: int  # generated so far (prefilled again with the prompt where it joins another engine)
    seg_tokens: int  # tokens generated since its last segment boundary
    deadline_s: float  # when its current segment is due

    @property
    def expected_segment_tokens(self) -> float: ...  # what its current segment is expected to take
    @property
    def typical_segment_tokens(self) -> float: ...  # its skill set's typical segment (at most the expected)

    @property
    def priced_plan_tokens_left(self) -> float: ...  # rtlm (domain/tokens_left.py)


M = TypeVar("M", bound=BatchMember)  # the planner's own generation type, handed back as it came


def _segment_s(first: float, step: float) -> Callable[[int], float]:
    """Seconds to write n tokens: the first iteration, then n - 1 at `step`."""
    return lambda n: first + (n - 1) * step


def _entry(gen: BatchMember) -> QueueEntry:
    """Its scheduling entry: every generation the controller weighs has one."""
    assert gen.entry is not None
    return gen.entry


def prefill_to_join(engine: Engine, gen: BatchMember) -> int:
    """Tokens a generation prefills to join `engine` without a context there: its prompt, and
    its plan so far when it moves from another replica or its engine was lost (the one
    estimate of that cost)."""
    return engine.prompt_tokens(gen.request) + gen.tokens


@dataclass
class _Decision(Generic[M]):
    """What one `select` call fixes as it goes: whether each generation's segment earns
    decoding alone (priced once), and the generations it may suspend or replace: those running
    before it, less any it replaced (one it admits is not suspended in the same decision)."""

    earns_alone: dict[str, bool]
    suspendable: list[M]

    def suspendable_in(self, batch: list[M]) -> list[M]:
        """Those of `batch` the decision may suspend, in batch order."""
        return [g for g in batch if g in self.suspendable]


@dataclass(frozen=True, slots=True)
class _Verdict:
    """What the latency-guided rule found: whether the newcomer may join, and the figures it
    weighed: the running segment at risk longest, what the newcomer loses by waiting for it,
    what the running lose in its company, and of that what the running at least as important
    lose (the part the rule weighs against the newcomer's own loss)."""

    keeps: bool
    at_risk: str = ""
    own_loss: float = 0.0
    weighed_loss: float = 0.0
    running_loss: float = 0.0
    wait_s: float = 0.0

    def figures(self) -> dict:
        return {
            "at_risk": self.at_risk,
            "own_loss": round(self.own_loss, 4),
            "weighed_loss": round(self.weighed_loss, 4),
            "running_loss": round(self.running_loss, 4),
            "wait_s": round(self.wait_s, 4),
        }


_KEEPS = _Verdict(True)


@dataclass
class Selection(Generic[M]):
    admitted: list[QueueEntry]  # in order
    preempted: list[M]  # suspended for a better queued generation (a full batch)
    shrunk: list[M]  # suspended so that a more important running one decodes faster


class BatchController:
    def __init__(
        self,
        config: BatchConfig,
        engine: Engine,
        latency_guided: bool,
        preemptive: bool,
        shrink: bool = False,
        consolidation: RtlmConfig | None = None,
        replica: int = 0,
        guard_by_importance: bool = False,
    ) -> None:
        self.max_batch_size = config.max_batch_size
        self.consolidation = consolidation
        self.latency_guided = latency_guided
        self.guard_by_importance = guard_by_importance
        self.preemptive = preemptive
        self.shrink = shrink
        self.engine = engine
        self.replica = replica  # which replica `engine` is
        self.deferred = 0  # admissions postponed to protect a running generation's deadline
        self.trace: DecisionTrace | None = None

    def select(
        self, queue: ReadyQueue | QueueShare, running: list[M], gens: Mapping[str, M], now: float
    ) -> Selection[M]:
        """Entries to admit, in order, and running generations to suspend.

        With a full batch, a queued generation whose priority beats the lowest-priority
        running one takes its place; that one keeps its context and returns to the queue
        (so an urgent first segment never waits for a batch slot)."""
        admitted: list[QueueEntry] = []
        preempted: list[M] = []
        batch = list(running)
        context = sum(self.engine.context_tokens(g.task_id) for g in batch)
        prefill_total = 0  # prompts admitted in this decision are all prefilled next iteration
        resumes = 0
        kv_free = self.engine.kv_free_tokens()
        decision = _Decision(earns_alone={}, suspendable=list(running))
        critical = self._critical(batch, now, decision.earns_alone)
        trace = self.trace
        entries = queue.in_order(now)
        for i, entry in enumerate(entries):
            gen = gens[entry.gen_id]
            if (
                critical is not None
                and self._can_wait_for(gen, entry, critical, batch, context, now)
                and self._slows(critical, gen, batch, context, now)
            ):
                if trace is not None:
                    trace.record(now, gen.task_id, Kind.DEFERRED, Reason.KEPT_OUT, favoured=critical.task_id)
                continue  # it can wait for a more important generation its company would slow down
            if self.consolidation is not None and not self._consolidates(gen, batch):
                if trace is not None:
                    self._stop(
                        trace,
                        now,
                        entries,
                        i,
                        Reason.CONSOLIDATION,
                        batch=len(batch),
                        priced_plan_tokens_left=round(gen.priced_plan_tokens_left, 1),
                    )
                break  # it waits for a batch of its length (the batch drains meanwhile)
            victim = None
            if len(batch) >= self.max_batch_size:
                step = self.engine.predict_step_s(len(batch), context)
                newcomer_earns = not self.guard_by_importance or self._earns_taken_now(gen, step, now)
                replaceable = [
                    g for g in decision.suspendable if not self._protected(g, gen, step, newcomer_earns, now)
                ]
                if not self.preemptive or not replaceable:
                    if trace is not None:
                        why = Reason.PROTECTED if self.preemptive and decision.suspendable else Reason.BATCH_FULL
                        self._stop(trace, now, entries, i, why, batch=len(batch))
                    break
                victim = min(replaceable, key=lambda g: queue.priority(_entry(g), now))
                if queue.priority(entry, now) <= queue.priority(_entry(victim), now):
                    if trace is not None:
                        self._stop(
                            trace,
                            now,
                            entries,
                            i,
                            Reason.BATCH_FULL,
                            batch=len(batch),
                            priority=round(queue.priority(entry, now), 4),
                            lowest_running=victim.task_id,
                            lowest_running_priority=round(queue.priority(_entry(victim), now), 4),
                        )
                    break
            prefill, new_context, resume = self._joining(gen)
            kv_needed = prefill + math.ceil(gen.expected_segment_tokens)
            if kv_needed > kv_free:
                if trace is not None:
                    self._stop(trace, now, entries, i, Reason.KV_FULL, kv_needed=kv_needed, kv_free=kv_free)
                break
            base = [g for g in batch if g is not victim]
            base_context = context - (self.engine.context_tokens(victim.task_id) if victim else 0)
            verdict = _KEEPS
            if self.latency_guided:
                verdict = self._keeps_deadlines(
                    base,
                    base_context + new_context,
                    prefill_total + prefill,
                    resumes + int(resume),
                    now,
                    gen,
                    entry,
                    decision,
                )
            if not verdict.keeps:
                self.deferred += 1
                why = Reason.LATENCY_GUIDED if self.guard_by_importance else Reason.KEEP_DEADLINES
                if self.guard_by_importance:
                    if trace is not None:
                        trace.record(now, gen.task_id, Kind.DEFERRED, why, **verdict.figures())
                    continue  # weighed on its own, it holds back no one behind it
                if trace is not None:
                    self._stop(trace, now, entries, i, why, **verdict.figures())
                break
            if victim is not None:
                decision.suspendable.remove(victim)
                preempted.append(victim)
            if trace is not None:
                self._trace_admission(trace, now, gen, entry, queue, victim, verdict, resume, len(base) + 1)
            queue.remove(entry.gen_id)
            admitted.append(entry)
            batch = base + [gen]
            context = base_context + new_context
            prefill_total += prefill
            resumes += int(resume)
            kv_free -= kv_needed
            critical = self._critical(batch, now, decision.earns_alone)
        shrunk: list[M] = []
        if critical is not None:
            shrunk = self._shrink_for(
                critical, decision.suspendable_in(batch), batch, context, prefill_total, resumes, now
            )
            if trace is not None:
                for g in shrunk:
                    trace.record(
                        now,
                        g.task_id,
                        Kind.SUSPENDED,
                        Reason.SHRUNK,
                        favoured=critical.task_id,
                        batch=len(batch) - len(shrunk),
                    )
        return Selection(admitted, preempted, shrunk)

    def _stop(
        self, trace: DecisionTrace, now: float, entries: list[QueueEntry], at: int, reason: Reason, **figures
    ) -> None:
        """Admission stops at `entries[at]` for `reason`; every entry after it waits behind it."""
        stopper = entries[at].gen_id
        trace.record(now, stopper, Kind.DEFERRED, reason, replica=self.replica, **figures)
        for entry in entries[at + 1 :]:
            trace.record(now, entry.gen_id, Kind.DEFERRED, Reason.BEHIND, stopped_at=stopper)

    def _trace_admission(
        self,
        trace: DecisionTrace,
        now: float,
        gen: M,
        entry: QueueEntry,
        queue: ReadyQueue | QueueShare,
        victim: M | None,
        verdict: _Verdict,
        resume: bool,
        batch: int,
    ) -> None:
        priority = round(queue.priority(entry, now), 4)
        if victim is not None:
            trace.record(
                now,
                victim.task_id,
                Kind.SUSPENDED,
                Reason.PREEMPTED,
                by=gen.task_id,
                priority=priority,
                own_priority=round(queue.priority(_entry(victim), now), 4),
            )
            reason = Reason.PREEMPTS
        else:
            reason = Reason.IMPORTANCE_GUARD if verdict.at_risk else Reason.FITS
        figures = verdict.figures() if verdict.at_risk else {}
        trace.record(
            now,
            gen.task_id,
            Kind.RESUMED if resume else Kind.ADMITTED,
            reason,
            replica=self.replica,
            batch=batch,
            priority=priority,
            **figures,
        )

    def _protected(self, gen: M, newcomer: M, step: float, newcomer_earns: bool, now: float) -> bool:
        """`timely`: a running generation is not replaced by a less important one if waiting
        for the newcomer's segment (and its own resume) would cost it utility, its own segment
        priced at its typical length (PUD prices it at l_max, at which a short urgent segment
        may look lost while it would be written in time); nor by one at most as important
        whose segment would earn nothing even taken now, at its expected length and this
        batch's step time. PUD ranks a newcomer by its G, which without a predictor is the
        paper's (a batch of one): in a saturated engine every fresh arrival looks on time
        there, while at the running batch its segment ends past its cutoff all the same; each
        such swap buys nothing and costs the engine a resume. `step`: this batch's decode step;
        `newcomer_earns`: the newcomer's segment ends before its cutoff if taken now (the same
        for every running generation it might replace)."""
        if not self.guard_by_importance or _entry(gen).tuf.beta < _entry(newcomer).tuf.beta:
            return False
        if not newcomer_earns:
            return True
        return _entry(gen).tuf.beta > _entry(newcomer).tuf.beta and self._loses_by_waiting(
            _entry(gen), self._typical_segment_tokens_left(gen), newcomer, step, now
        )

    def _earns_taken_now(self, gen: M, step: float, now: float, typical: bool = False) -> bool:
        """True if `gen`'s current segment, at its expected (or typical) length from now at
        `step` seconds a token, ends before its cutoff."""
        entry = _entry(gen)
        tokens = self._typical_segment_tokens_left(gen) if typical else self._segment_tokens_left(gen)
        return entry.tuf.utility(now + tokens * step - entry.ref_s) > 0

    def _consolidates(self, gen: M, batch: list[M]) -> bool:
        """rtlm: room in a consolidated batch, and priced plan tokens left like the batch's."""
        consolidation = self.consolidation
        assert consolidation is not None  # asked only under rtlm
        if len(batch) >= consolidation.batch_size:
            return False
        if not batch:
            return True
        median = statistics.median(g.priced_plan_tokens_left for g in batch)
        return abs(math.log(gen.priced_plan_tokens_left / median)) <= consolidation.consolidation

    def _shrink_for(
        self,
        critical: M,
        candidates: list[M],
        batch: list[M],
        context: int,
        prefill: int,
        resumes: int,
        now: float,
    ) -> list[M]:
        """The fewest running generations to suspend so that `critical` earns more utility
        from its segment at its typical length; each can wait for it (and its own resume) at no
        loss. Empty if no such set helps: a suspension and its resume are not free. The next
        iteration, at either batch size, also prefills the `prefill` tokens and `resumes` of
        this decision's admissions (the critical generation's own prompt, if just admitted)."""
        waiting = [
            g
            for g in sorted(candidates, key=lambda g: -(g.deadline_s - now))  # most slack first
            if self._can_wait_for(g, _entry(g), critical, batch, context, now)
        ]
        if not waiting:  # e.g. a batch of equally important generations
            return []
        step = self.engine.predict_step_s(len(batch), context)
        first = self.engine.predict_step_s(len(batch), context, prefill, resumes)
        chosen: list[M] = []
        smaller, small_context = list(batch), context
        for g in waiting:
            chosen.append(g)
            smaller.remove(g)
            small_context -= self.engine.context_tokens(g.task_id)
            small_step = self.engine.predict_step_s(len(smaller), small_context)
            small_first = self.engine.predict_step_s(len(smaller), small_context, prefill, resumes)
            if self._earns_more(
                critical,
                now,
                _segment_s(small_first, small_step),
                _segment_s(first, step),
            ):
                return chosen
        return []

    def _joining(self, gen: M) -> tuple[int, int, bool]:
        """(tokens to prefill, context it brings, whether it resumes) for `gen` joining this
        batch: a resume keeps its context here; a new generation, one moving here from another
        replica or one whose engine was lost prefills."""
        if gen.in_engine and gen.replica == self.replica:
            return 0, self.engine.context_tokens(gen.task_id), True
        prefill = prefill_to_join(self.engine, gen)
        return prefill, prefill, False

    def _slows(self, critical: M, gen: M, batch: list[M], context: int, now: float) -> bool:
        """True if `gen` joining the batch would cost `critical` utility on its current segment
        (once that segment has slack, the generations kept out for it may return)."""
        prefill, added, resume = self._joining(gen)
        alone = self.engine.predict_step_s(len(batch), context)
        first, joined = self._joined_steps(len(batch), context + added, prefill, int(resume))
        return self._earns_more(critical, now, lambda n: n * alone, lambda n: first + (n - 1) * joined)

    def _earns_more(self, gen: M, now: float, fast: Callable[[int], float], slow: Callable[[int], float]) -> bool:
        """True if `gen`'s current segment earns more utility when its n tokens left take
        `fast(n)` seconds than `slow(n)`, n at its typical length. Without a predictor the
        expected length is the skill set's l_max, which a model's segments often undercut
        several times over: priced at it, a short segment would look hopeless where it earns,
        or in need of a smaller batch where it is done in time anyway."""
        entry, n = _entry(gen), self._typical_segment_tokens_left(gen)
        return entry.utility_lost(now + fast(n), now + slow(n)) > 0

    def _critical(self, batch: list[M], now: float, earns_alone: dict[str, bool]) -> M | None:
        """The running generation less important ones may be suspended or kept out for: the
        most important (largest beta, then earliest deadline) whose segment could still earn,
        decoding alone. One already lost gains nothing from a smaller batch, and chosen for
        its early deadline it would hide an urgent segment that still earns. `earns_alone`
        keeps each generation's answer for the rest of the decision (this is asked again
        after every admission)."""
        if not self.shrink or not batch:
            return None
        for g in batch:
            if g.task_id not in earns_alone:
                earns_alone[g.task_id] = self._earns_taken_now(
                    g, self.engine.predict_step_s(1, self._joining(g)[1]), now, typical=True
                )
        return max(
            (g for g in batch if earns_alone[g.task_id]),
            key=lambda g: (_entry(g).tuf.beta, -g.deadline_s),
            default=None,
        )

    @staticmethod
    def _segment_tokens_left(gen: M) -> int:
        """Its current segment's tokens left, in whole tokens."""
        return math.ceil(segment_tokens_left(gen.expected_segment_tokens, gen.seg_tokens))

    @staticmethod
    def _typical_segment_tokens_left(gen: M) -> int:
        """Its current segment's tokens left at its skill set's typical length, in whole tokens."""
        return math.ceil(segment_tokens_left(gen.typical_segment_tokens, gen.seg_tokens))

    def _can_wait_for(
        self,
        gen: M,
        entry: QueueEntry,
        critical: M,
        batch: list[M],
        context: int,
        now: float,
    ) -> bool:
        """True if `gen` is less important than `critical` and finishing its segment after the
        critical one's (at the current batch) costs it no utility, whether its segment would
        otherwise end at the next token or at its expected length."""
        if gen is critical or entry.tuf.beta >= _entry(critical).tuf.beta:
            return False
        step = self.engine.predict_step_s(max(1, len(batch)), context)
        # Priced at the expected length alone, a short segment that would be written in time
        # can look lost whether it waits or not.
        delayed = self._finish_after(critical, now + self._segment_tokens_left(gen) * step, step)
        return entry.utility_lost(now + step, delayed) <= 0

    def _loses_by_waiting(self, entry: QueueEntry, tokens: int, other: M, step: float, now: float) -> bool:
        """True if a segment (scheduling entry `entry`) with `tokens` to go earns less when it
        finishes after `other`'s segment and its own resume than when it goes on now, at
        `step` seconds a token."""
        finish = now + tokens * step
        return entry.utility_lost(finish, self._finish_after(other, finish, step)) > 0

    def _finish_after(self, other: M, finish: float, step: float) -> float:
        """When a segment due at `finish` ends if it first waits for `other`'s segment and its
        own resume, at `step` seconds a token."""
        return finish + self._segment_tokens_left(other) * step + self.engine.predict_step_s(1, 0, resumes=1)

    def _keeps_deadlines(
        self,
        batch: list[M],
        context: int,
        prefill: int,
        resumes: int,
        now: float,
        newcomer: M,
        entry: QueueEntry,
        decision: _Decision[M],
    ) -> _Verdict:
        """Not `keeps` if admitting `newcomer` would make a running generation miss a deadline it
        would otherwise meet (one that misses anyway does not block admissions). With
        `guard_by_importance`, a running segment is at risk wherever the newcomer's company
        costs it utility (one already late but still earning too), and the choice is weighed
        at the margin, importance first: the newcomer waits if waiting for the segments at
        risk costs it nothing, or less than the ones at least as important lose in its
        company. What less important segments lose counts only against a newcomer that loses
        nothing by waiting: summed against an urgent task's own loss, a crowd of normal
        segments would hold it back one-for-one in utility, and the urgent task is the one a
        user cannot spare (an urgent newcomer waits for a normal segment only while waiting
        costs it nothing). The queue behind the newcomer is not summed in (a crowd of small
        waits would outweigh nearly any loss, most of all on a CPU, where a step costs nearly
        the same at any batch size): a deferral holds back only the newcomer, and each
        generation behind it is weighed in turn.
        Both sides are priced at their typical lengths, as the preemption guard prices them:
        at l_max, a running segment a token or two from its end looks at risk, and the
        newcomer waits for nothing. The running segments are priced in the whole batch with
        the newcomer, the newcomer at the batch it will decode in (`_newcomer_steps`): priced
        beside segments the shrink would suspend for it, an urgent newcomer that would be in
        time looks lost anyway, and waits until it is."""
        step_now = self.engine.predict_step_s(len(batch), context)
        first, step = self._joined_steps(len(batch), context, prefill, resumes)
        at_risk, loss, total, wait = "", 0.0, 0.0, 0.0  # loss: of the segments at risk at least as important
        for gen in batch:
            slack = gen.deadline_s - now
            left = (
                self._typical_segment_tokens_left(gen) if self.guard_by_importance else self._segment_tokens_left(gen)
            )
            alone, joined = left * step_now, first + (left - 1) * step
            if not self.guard_by_importance or gen.entry is None:
                if alone < slack <= joined:
                    return _Verdict(False, gen.task_id, wait_s=alone)
                continue
            lost = gen.entry.utility_lost(now + alone, now + joined)
            if lost > 0:
                total += lost
                if alone >= wait:
                    at_risk, wait = gen.task_id, alone
                if gen.entry.tuf.beta >= entry.tuf.beta:
                    loss += lost
        if not at_risk:
            return _KEEPS
        own_first, own_step = self._newcomer_steps(batch, context, prefill, resumes, newcomer, now, decision)
        own = self._newcomer_segment_s(newcomer, own_first, own_step)
        own_loss = entry.utility_lost(now + own, now + wait + own)
        return _Verdict(own_loss > 0 and own_loss >= loss, at_risk, own_loss, loss, total, wait)

    def _newcomer_steps(
        self,
        batch: list[M],
        context: int,
        prefill: int,
        resumes: int,
        newcomer: M,
        now: float,
        decision: _Decision[M],
    ) -> tuple[float, float]:
        """(its first iteration, each one after it) for `newcomer` once it joins `batch` (`context`
        tokens with its own): beside all of them, or with shrinking, without those the shrink
        would suspend for it where it becomes the most important segment that earns (of those
        the decision may suspend, as `select` shrinks)."""
        joined = [*batch, newcomer]
        if self._critical(joined, now, decision.earns_alone) is newcomer:
            shrunk = self._shrink_for(newcomer, decision.suspendable_in(batch), joined, context, prefill, resumes, now)
            if shrunk:
                batch = [g for g in batch if g not in shrunk]
                context -= sum(self.engine.context_tokens(g.task_id) for g in shrunk)
        return self._joined_steps(len(batch), context, prefill, resumes)

    def _joined_steps(self, batch_size: int, context: int, prefill: int, resumes: int) -> tuple[float, float]:
        """(the first iteration, each one after it) once a newcomer joins a batch of `batch_size`
        with `context` tokens: the first also prefills `prefill` tokens and makes `resumes` resumes."""
        return (
            self.engine.predict_step_s(batch_size + 1, context, prefill, resumes),
            self.engine.predict_step_s(batch_size + 1, context),
        )

    def _newcomer_segment_s(self, newcomer: M, first: float, step: float) -> float:
        """How long a newcomer's segment takes once admitted, at its typical length: its first
        iteration (`first`), then `step` a token."""
        return first + (self._typical_segment_tokens_left(newcomer) - 1) * step
