"""The planner core: tasks in, segments out, one code path for live and simulated runs.

Each engine iteration (`step`) first lets the batch controller admit the best queued
generations (and suspend the ones it must), then advances every running generation by one
token and feeds the new text to that task's segmenter. A completed segment goes to the robot
at once, or is held back while streaming it would leave the robot waiting later (`timely`,
dispatch/release.py). Under the paper's policy the generation then leaves the batch (its
context stays in the engine) and re-enters the ready queue with TUF_1, referenced to the
estimated end of the segment's execution; `timely` keeps it running. Robot reports drive the
utility accounting and the final status. With several engine replicas (planning/replicas.py)
each has its own batch controller, and `Placing` puts each generation on one by a placement
policy (sched/placement.py). The estimates the decisions are priced with (G, the step time of
the batch the queue fills, the hold's outlook) are in planning/estimates.py.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import time
from collections import deque
from collections.abc import Callable, Mapping

from llm_planner.catalog.exec_model import ExecModel, load_exec_model
from llm_planner.catalog.safety import SafetyRules, restricted
from llm_planner.catalog.skills import SkillSet, load_skill_set
from llm_planner.dispatch.dispatcher import Dispatcher, RobotWork
from llm_planner.dispatch.release import Outlook, best_hold, release_utility
from llm_planner.dispatch.robot_port import RobotListener, RobotPort
from llm_planner.domain.clock import Clock
from llm_planner.domain.decisions import DecisionTrace, Iteration, Kind, Reason
from llm_planner.domain.tasks import (
    DispatchedSegment,
    StatusUpdate,
    TaskRecord,
    TaskRequest,
    TaskState,
)
from llm_planner.domain.tuf import Tuf
from llm_planner.engine.base import Continuation, Engine, EngineError, GenerationRequest, StepResult, TokenOutput
from llm_planner.planning.estimates import Estimates
from llm_planner.planning.gate import SafetyGate
from llm_planner.planning.generation import PlanGeneration
from llm_planner.planning.intake import instruction_problem
from llm_planner.planning.prompts import plan_request, shared_request
from llm_planner.planning.replan import Failure, describe, failure_of, follow_up_request, refusal, replanned_message
from llm_planner.planning.replicas import Placing, Replica, ReplicaSet
from llm_planner.planning.retrieval import example_index, examples_for
from llm_planner.planning.segment_lengths import ObservedSegments, make_segment_lengths
from llm_planner.planning.segmenter import Segment, make_segmenter, split_segments
from llm_planner.sched.batch import BatchController
from llm_planner.sched.policies import Policy
from llm_planner.sched.queues import QueueEntry, QueueShare, ReadyQueue
from llm_planner.settings.config import PlannerConfig

log = logging.getLogger(__name__)

EXEC_SAMPLES_KEPT = 100_000


class Planner:
    def __init__(
        self,
        config: PlannerConfig,
        policy: Policy,
        engine: Engine | ReplicaSet,
        clock: Clock,
        robots: Callable[[RobotListener], RobotPort],
        on_status: Callable[[StatusUpdate], None] | None = None,
        keep_finished: int | None = None,
        decisions: DecisionTrace | None = None,
        safety: Mapping[str, SafetyRules] | None = None,
    ) -> None:
        """`engine`: one engine, or replicas of one (planning/replicas.py). `robots`: builds the
        robot port for this planner, which it reports to. `keep_finished`: how many finished
        tasks' records to keep (the oldest go first; a long-running node's memory stays
        bounded); None keeps all (runs that report on them). `decisions`: where the scheduling
        decisions go (domain/decisions.py); None traces nothing. `safety`: each robot's safety
        gate, by robot id (planning/gate.py)."""
        self.config = config
        if config.vllm.retrieved_examples:  # a bad corpus fails here, not in a task's submit
            example_index(config.vllm.example_corpus)
        self.policy = policy
        self.replicas = engine if isinstance(engine, ReplicaSet) else ReplicaSet([engine])
        # The replicas run one model with one profile: the first stands for all in estimates.
        self.engine = self.replicas[0].engine
        self.clock = clock
        self.on_status = on_status
        self.exec_stat = config.exec_estimate
        # vLLM baselines admit greedily and never preempt, as vLLM's FCFS scheduler does.
        # A generation leaves the batch after a segment until its robot needs more: always in
        # the paper; with keep_running never by itself, only when the batch controller needs
        # its place (a full batch, or shrinking for an urgent one). A decode step costs little
        # more at a bigger batch (profiles: +3.6 ms per sequence on 74 ms on the AVX2 CPU,
        # +0.3 ms on 22 ms on the RTX 4090), while a pause costs a resume and, behind a queue,
        # risks a late one that leaves the robot waiting.
        self.behaviour = behaviour = policy.behaviour(config.features, config.batch.latency_guided)
        self.queue = policy.make_queue(behaviour)
        self.batches = [
            BatchController(
                config.batch,
                replica.engine,
                latency_guided=behaviour.latency_guided,
                preemptive=behaviour.preemptive,
                shrink=behaviour.shrinks_batch,
                consolidation=config.rtlm if behaviour.prices_whole_plans else None,
                replica=replica.index,
                guard_by_importance=behaviour.guards_by_importance,
            )
            for replica in self.replicas
        ]
        self.decisions = decisions
        self.gate = SafetyGate(safety) if safety else None
        for batch in self.batches:
            batch.trace = decisions
        self.records: dict[str, TaskRecord] = {}  # every task still running and the finished ones kept
        self._keep_finished = keep_finished
        self._finished: deque[str] = deque()
        self.segment_lengths = make_segment_lengths(
            config, behaviour.predicted_lengths, required=behaviour.prices_whole_plans
        )
        self.observed_segments = ObservedSegments()
        # (robot type, skill, argument, seconds) of the latest calls, for refitting exec models
        self.exec_samples: deque[tuple[str, str, float | None, float]] = deque(maxlen=EXEC_SAMPLES_KEPT)
        self._gens: dict[str, PlanGeneration] = {}
        self.placing = Placing(
            self.replicas,
            config.placement,
            self.queue,
            behaviour,
            config.batch.max_batch_size,
            self._gens,
            decisions,
            clock,
        )
        self.admission_s = 0.0  # wall time spent choosing each iteration's batch (the cost of scheduling)
        self.admissions = 0  # how many times it was chosen
        self._joined: dict[int, int] = {}  # per replica, generations that joined its next iteration (traced)
        self._types: dict[str, tuple[SkillSet, ExecModel]] = {}
        for name, rt in config.robot_types.items():
            skill_set = load_skill_set(rt.skill_set)
            model = load_exec_model(rt.exec_model)
            if model.spec.skill_set != skill_set.name:
                raise ValueError(
                    f"robot type {name}: exec model {rt.exec_model} is for skill set "
                    f"{model.spec.skill_set}, not {skill_set.name}"
                )
            self._types[name] = (skill_set, model)
        self.estimates = Estimates(
            behaviour,
            self.replicas,
            self.queue,
            self.segment_lengths,
            config.batch.max_batch_size,
            [skill_set for skill_set, _ in self._types.values()],
        )
        self.robots = robots(self)  # last: a port may start processes, and nothing above may fail after
        self.dispatcher = Dispatcher(
            self.robots, self._on_executing, None if behaviour.streams_segments else split_segments
        )

    def _priced_plan_tokens(self, task_id: str, generated: int = 0) -> float:
        """rtlm: the plan's predicted, uncertainty-priced size (segment_lengths.plan_size)."""
        size = self.segment_lengths.plan_size(task_id, self.config.rtlm.uncertainty_weight, generated)
        assert size is not None  # rtlm requires the predictor, which predicted the task when it came
        return size

    def robot_models(self, task_id: str) -> tuple[SkillSet, ExecModel]:
        return self._types[self.records[task_id].request.robot_type]

    # ----------------------------------------------------------------- intake
    def submit(self, request: TaskRequest) -> TaskRecord:
        """Accept a task (QUEUED) or reject it with a reason (REJECTED); never drops it."""
        if request.task_id in self.records:
            self._publish(
                StatusUpdate(
                    request.task_id,
                    request.robot_id,
                    TaskState.REJECTED,
                    self.clock.now(),
                    message=f"duplicate task_id {request.task_id!r}",
                )
            )
            return self.records[request.task_id]
        record = TaskRecord(request)
        self.records[request.task_id] = record
        reason = self._rejection_reason(request)
        if reason:
            self._finish_record(record, TaskState.REJECTED, reason)
            return record
        skill_set, model = self._types[request.robot_type]
        gen = PlanGeneration(
            record,
            skill_set,
            make_segmenter(skill_set),
            self._generation_request(request),
            RobotWork(model, self.exec_stat),
            observed=self.observed_segments,
        )
        self.segment_lengths.start(request.task_id, skill_set, request.instruction)
        gen.ahead_tokens = self.segment_lengths.ahead(request.task_id, skill_set, 0, 0)
        if self.behaviour.prices_whole_plans:
            gen.plan_tokens = self._priced_plan_tokens(request.task_id)
        self._gens[request.task_id] = gen
        self.placing.at_arrival(gen, self.clock.now())
        self._enqueue(gen, self._next_entry(gen), Reason.ARRIVAL)
        self._emit(record, TaskState.QUEUED)
        return record

    def _enqueue(self, gen: PlanGeneration, entry: QueueEntry, reason: Reason) -> None:
        self.queue.push(entry)
        if self.decisions is not None:
            now = self.clock.now()
            self.decisions.record(
                now,
                gen.task_id,
                Kind.QUEUED,
                reason,
                priority=round(self.queue.priority(entry, now), 4),
                order=self.policy.order.value,
                beta=entry.tuf.beta,
                ert_s=entry.tuf.ert_s,
                cutoff_s=entry.tuf.cutoff_s,
                ref_s=round(entry.ref_s, 4),
                gen_time_s=round(entry.gen_time_s, 4),
                deadline_s=round(entry.deadline_s, 4),
                latest_start_s=round(entry.latest_start_s, 4),
                segment=len(gen.record.segments),
            )

    def _generation_request(self, request: TaskRequest) -> GenerationRequest:
        skill_set, _ = self._types[request.robot_type]
        rules = self.gate.of(request.robot_id) if self.gate is not None else None
        return plan_request(
            request.task_id,
            skill_set,
            request.instruction,
            request.recorded_plan,
            tuned=skill_set.name in self.engine.tuned_skill_sets,
            task_grammar=self.config.vllm.task_grammar,
            alert_hazards=self.config.vllm.alert_hazards,
            grammar_skill_set=restricted(skill_set, rules) if rules is not None else None,
            examples=examples_for(
                skill_set.name,
                request.instruction,
                self.config.vllm.retrieved_examples,
                self.config.vllm.example_corpus,
            ),
        )

    def warm_up(self) -> None:
        """Have every engine cache every configured skill set's shared prompt before tasks come."""
        for replica in self.replicas:
            self._warm_up(replica.engine)

    def _warm_up(self, engine: Engine) -> None:
        skill_sets = {skill_set.name: skill_set for skill_set, _ in self._types.values()}
        engine.warm_up([shared_request(s, s.name in engine.tuned_skill_sets) for s in skill_sets.values()])

    def reject(self, task_id: str, robot_id: str, reason: str) -> None:
        """A task refused before it became a request (bad fields): REJECTED with the reason."""
        self._publish(StatusUpdate(task_id, robot_id, TaskState.REJECTED, self.clock.now(), message=reason))

    def _rejection_reason(self, r: TaskRequest) -> str:
        if r.robot_type not in self._types:
            return f"unknown robot type {r.robot_type!r}"
        problem = instruction_problem(r.instruction)
        if problem:
            return problem
        if not math.isfinite(r.arrival_s):
            return "arrival time is not finite"
        if self.engine.needs_recorded_plan and r.recorded_plan is None:
            return "no recorded plan for this instruction (the sim engine replays recorded plans)"
        return ""

    def _next_entry(self, gen: PlanGeneration) -> QueueEntry:
        """The scheduling entry of the segment the generation works on next: due by TUF_0 from
        the arrival while the robot has been sent nothing, else by TUF_1 from when the robot
        is expected to be free."""
        req = gen.record.request
        unsent = gen.robot.calls == 0
        first = gen.tokens == 0
        entry = QueueEntry(
            gen_id=req.task_id,
            tuf=req.tuf if unsent else req.tuf.resumed(),
            ref_s=req.arrival_s if unsent else gen.robot.free_s,
            gen_time_s=self.estimates.gen_time(gen, first),
            arrival_s=req.arrival_s,
            first_deadline_s=req.arrival_s + req.tuf.ert_s,
            lane=int(
                self.behaviour.prices_whole_plans
                and self.segment_lengths.is_huge(req.task_id, self.config.rtlm.offload_quantile)
            ),
        )
        gen.deadline_s = entry.deadline_s
        gen.entry = entry
        return entry

    # ----------------------------------------------------------------- engine loop
    @property
    def busy(self) -> bool:
        return bool(self.queue) or self.replicas.running

    @property
    def deferred_admissions(self) -> int:
        return sum(batch.deferred for batch in self.batches)

    def step(self, until_s: float = math.inf) -> bool:
        """One engine iteration; False when there was nothing to run. `until_s`: the next
        outside event (an arrival, a robot's report), which replicas running side by side do
        not step past."""
        if self.gate is not None and self.gate.waiting:
            self._expire_approvals(self.clock.now())
        started = time.perf_counter()
        self._admit(self.clock.now())
        self.admission_s += time.perf_counter() - started
        self.admissions += 1
        batches = self._batches_now() if self.decisions is not None else None
        event = self.replicas.step(self.clock, until_s)
        if event is None:
            return False
        replica = event.replica
        if batches is not None and event.result is not None:
            self._trace_iteration(event.replica, event.result, event.elapsed_s, batches[replica.index])
        if event.error is not None:  # a fault inside an engine loses its generations, not the planner
            self._restart_engine(replica, event.error)
            return True
        if event.result is None:
            return True
        now = self.clock.now()
        self.estimates.observe_step(replica.index, event.elapsed_s)
        for out in event.result.outputs:
            gen = self._gens.get(out.gen_id)
            if gen is not None:
                self._on_token(gen, out, now)
        return True

    def _batches_now(self) -> list[tuple[float, tuple[str, ...], int]]:
        """Per replica, before its iteration: (now, its batch, the context it attends)."""
        now = self.clock.now()
        return [
            (now, tuple(r.engine.running), sum(r.engine.context_tokens(g) for g in r.engine.running))
            for r in self.replicas
        ]

    def _trace_iteration(
        self, replica: Replica, result: StepResult, elapsed_s: float, before: tuple[float, tuple[str, ...], int]
    ) -> None:
        started_s, members, context = before
        assert self.decisions is not None  # traced only when decisions are
        self.decisions.iteration(
            Iteration(
                round(started_s, 6),
                replica.index,
                round(elapsed_s, 6),
                round(replica.engine.predict_step_s(max(1, len(members)), context), 6),
                members,
                result.prefill_tokens,
                self._joined.pop(replica.index, 0),
            )
        )

    def _restart_engine(self, replica: Replica, exc: EngineError) -> None:
        """Restart the engine and warm it up again. The generations that were inside it lost
        their context with it: each goes back to the queue and on from the text the planner
        received (its prompt and plan so far prefilled again, on whichever replica admits it).
        One that was lost before fails with the reason, so a fault that follows a generation
        does not loop; queued tasks stay queued."""
        which = "the engine" if len(self.replicas) == 1 else f"engine replica {replica.index}"
        reason = f"engine step failed ({type(exc).__name__}: {exc}); {which} was restarted"
        log.error("%s", reason, exc_info=exc)
        now = self.clock.now()
        inside = [gen for gen in self._gens.values() if gen.in_engine and gen.replica == replica.index]
        for gen in inside:
            gen.in_engine = False  # nothing to release in an engine that is being replaced
            gen.replica = None
            self._end_run(gen, now)
        replica.engine.restart()
        self._warm_up(replica.engine)
        for gen in inside:
            if gen.recovered or gen.entry is None:
                self._finish(gen, TaskState.FAILED, reason if gen.entry is None else f"{reason}, a second time")
                continue
            gen.recovered = True
            if self.decisions is not None:
                self.decisions.record(
                    now, gen.task_id, Kind.SUSPENDED, Reason.ENGINE_RESTART, replica=replica.index, tokens=gen.tokens
                )
            try:
                if gen.tokens:
                    gen.lost_context = replica.engine.continuation_of(gen.request, "".join(gen.text_parts), gen.tokens)
            except EngineError as exc2:
                self._finish(gen, TaskState.FAILED, f"{reason}; its plan could not go on ({exc2})")
                continue
            self.queue.push(gen.entry)
            self._emit(
                gen.record,
                TaskState.SUSPENDED,
                segment_index=len(gen.record.segments),
                message=f"{reason}; the plan goes on from its {gen.tokens} tokens",
            )

    def _admit(self, now: float) -> None:
        if len(self.replicas) == 1:
            self._admit_to(self.replicas[0], self.queue, now)
            return
        free = [r for r in self.replicas if r.free]
        if free:
            shares = self.placing.shares(now)
            for replica in free:
                self._admit_to(replica, shares[replica.index], now)

    def _admit_to(self, replica: Replica, queue: ReadyQueue | QueueShare, now: float) -> None:
        engine = replica.engine
        running = [self._gens[g] for g in engine.running]
        selection = self.batches[replica.index].select(queue, running, self._gens, now)
        for gen, why in [(g, "preempted by a higher-priority generation") for g in selection.preempted] + [
            (g, "paused for a more important generation") for g in selection.shrunk
        ]:
            engine.suspend(gen.task_id)
            self._end_run(gen, now)
            assert gen.entry is not None  # it ran: it was queued with one
            self.queue.push(gen.entry)  # same segment, same deadline; resumes where it stopped
            self._emit(gen.record, TaskState.SUSPENDED, segment_index=len(gen.record.segments), message=why)
        for entry in selection.admitted:
            gen = self._gens[entry.gen_id]
            # Inside an engine that orders work itself (vLLM), earliest deadline first for the
            # suspending policies; arrival order (the same urgency for all) for the vLLM baselines.
            urgency = -entry.deadline_s if self.behaviour.preemptive and math.isfinite(entry.deadline_s) else 0.0
            try:
                if gen.in_engine and gen.replica != replica.index:
                    self._move(gen, replica, urgency)
                elif gen.in_engine:
                    engine.resume(gen.task_id, urgency)
                elif gen.lost_context is not None:
                    continuation, gen.lost_context = gen.lost_context, None
                    self._attach(gen, replica, continuation, urgency)
                else:
                    engine.add(gen.request, urgency)
                    gen.in_engine = True
                    if gen.replica is None:
                        self.placing.place(gen, replica.index)
            except EngineError as exc:
                self._finish(gen, TaskState.FAILED, f"engine error: {exc}")
                continue
            gen.run_started_s = now
            if self.decisions is not None:
                self._joined[replica.index] = self._joined.get(replica.index, 0) + 1
            self._emit(gen.record, TaskState.GENERATING, segment_index=len(gen.record.segments))

    def _move(self, gen: PlanGeneration, to: Replica, urgency: float) -> None:
        """Out of the replica that holds its context, into `to`, which prefills it again."""
        source = gen.replica
        assert source is not None  # it is in an engine
        continuation = self.replicas[source].engine.detach(gen.task_id)
        if self.decisions is not None:
            self.decisions.record(
                self.clock.now(),
                gen.task_id,
                Kind.MOVED,
                Reason.PLACEMENT,
                source=source,
                target=to.index,
                tokens=continuation.tokens,
            )
        gen.replica = None  # if `to` refuses it, the generation has left every engine
        gen.in_engine = False
        self._attach(gen, to, continuation, urgency)

    def _attach(self, gen: PlanGeneration, to: Replica, continuation: Continuation, urgency: float) -> None:
        """Into `to`, which prefills its prompt and plan so far and goes on from there."""
        to.engine.attach(continuation, urgency)
        gen.in_engine = True
        self.placing.place(gen, to.index)

    def _on_token(self, gen: PlanGeneration, out: TokenOutput, now: float) -> None:
        record = gen.record
        if math.isnan(record.first_token_s):
            record.first_token_s = now
        gen.text_parts.append(out.text)
        gen.seg_tokens += 1
        gen.tokens += 1
        if gen.tokens >= gen.plan_tokens:  # rtlm's plan ran past its predicted size (nan: not rtlm)
            gen.plan_tokens = self._priced_plan_tokens(gen.task_id, gen.tokens)
        segments = gen.segmenter.feed(out.text) if self.behaviour.streams_segments else []
        if out.finished:
            gen.plan_done = True
            gen.truncated = out.truncated
            record.plan = "".join(gen.text_parts)
            record.plan_done_s = now
            self._end_run(gen, now)
            self._release_context(gen)
            if self.behaviour.streams_segments:
                tail = gen.segmenter.flush()
                if tail is not None:
                    segments.append(tail)
                elif not segments:  # ended by the end-of-sequence token: the robot must still learn it
                    segments.append(gen.segmenter.end_of_plan())
            else:
                segments = [Segment(0, record.plan, gen.skill_set.find_calls(record.plan))]
        with_calls = sum(1 for segment in segments if segment.calls)
        if with_calls:
            self.observed_segments.observe(gen.skill_set.name, gen.seg_tokens)
        gen.call_segments += with_calls
        if out.finished:
            self.observed_segments.observe_plan(gen.skill_set.name, gen.call_segments)
        gen.held.extend(segments)
        gen.segments_generated += len(segments)
        gen.generated_exec_s += sum(gen.robot.duration(s.calls, "mean") for s in segments)
        if segments and not out.finished:
            gen.seg_tokens = 0
            gen.ahead_tokens = self.segment_lengths.ahead(
                gen.task_id, gen.skill_set, gen.tokens, gen.segments_generated
            )
        self._release(gen, out.finished, now)
        if gen.task_id not in self._gens:  # the safety gate ended it
            return
        if out.finished:
            self._maybe_complete(gen)
        elif segments:
            entry = self._next_entry(gen)
            if self.behaviour.pauses_after_segment:
                self.estimates.engine_of(gen).suspend(gen.task_id)
                self._end_run(gen, now)
                if self.decisions is not None:
                    self.decisions.record(now, gen.task_id, Kind.SUSPENDED, Reason.PAUSED, tokens=gen.tokens)
                self._enqueue(gen, entry, Reason.SEGMENT_DONE)
                self._emit(record, TaskState.SUSPENDED, segment_index=len(record.segments))

    def _release(self, gen: PlanGeneration, plan_done: bool, now: float) -> None:
        """Send the held segments to the robot now, or keep holding them (see dispatch.release)."""
        if not gen.held or not self._through_gate(gen, now):
            return
        if self.behaviour.holds_segments:
            if not plan_done:
                outlook = self.estimates.outlook(gen, now, self.dispatcher.switch_gap_s)
                hold_for = best_hold(outlook)
                if self.decisions is not None:
                    self._trace_release(gen, outlook, hold_for, now)
                if hold_for > 0:
                    return
            elif self.decisions is not None:
                self.decisions.record(now, gen.task_id, Kind.STREAMED, Reason.PLAN_DONE, segments=len(gen.held))
            self.dispatcher.send(gen.record, gen.skill_set, gen.robot, gen.held, plan_done, now)
        else:
            if self.decisions is not None:
                self.decisions.record(
                    now,
                    gen.task_id,
                    Kind.STREAMED,
                    Reason.EACH_SEGMENT if self.behaviour.streams_segments else Reason.PLAN_DONE,
                    segments=len(gen.held),
                )
            for i, segment in enumerate(gen.held):
                self.dispatcher.send(
                    gen.record, gen.skill_set, gen.robot, [segment], plan_done and i == len(gen.held) - 1, now
                )
        gen.held = []

    def _through_gate(self, gen: PlanGeneration, now: float) -> bool:
        """Whether the held segments may go (the robot's safety gate): a segment the gate
        stops ends the task FAILED, unsent; one that needs approval waits for it."""
        if self.gate is None:
            return True
        verdict = self.gate.check(gen.task_id, gen.record.request.robot_id, gen.held, now)
        if verdict.stop:
            self._finish(gen, TaskState.FAILED, f"safety gate: {verdict.stop}; the segment was not sent")
            return False
        if verdict.wait_for:
            if self.decisions is not None:
                self.decisions.record(
                    now, gen.task_id, Kind.HELD, Reason.AWAITING_APPROVAL, call=verdict.wait_for, segments=len(gen.held)
                )
            return False
        return True

    def approve(self, task_id: str, approved: bool, reason: str = "") -> str:
        """An operator's answer to a call that waits for approval; "" when it applied, else why not."""
        gen = self._gens.get(task_id)
        gate = self.gate
        waiting = gate.waiting.get(task_id) if gate is not None else None
        if gen is None or gate is None or waiting is None:
            return f"task {task_id!r} is not waiting for an approval"
        if not approved:
            self._finish(
                gen, TaskState.FAILED, f"{waiting.call} denied by an operator" + (f": {reason}" if reason else "")
            )
            return ""
        gate.approve(task_id, gen.held)
        self._release(gen, gen.plan_done, self.clock.now())
        if task_id in self._gens:
            self._maybe_complete(gen)
        return ""

    def _expire_approvals(self, now: float) -> None:
        """No answer in time is a denial: the task fails closed."""
        assert self.gate is not None  # asked only with a gate
        for task_id, waiting in self.gate.expired(now):
            gen = self._gens.get(task_id)
            if gen is None:
                self.gate.forget(task_id)
                continue
            self._finish(
                gen,
                TaskState.FAILED,
                f"{waiting.call} was not approved within {waiting.timeout_s:g} s (the safety gate fails closed)",
            )

    def _trace_release(self, gen: PlanGeneration, outlook: Outlook, hold_for: int, now: float) -> None:
        """The hold rule's comparison: expected utility sent now against held for `hold_for` more segments."""
        assert self.decisions is not None  # traced only when decisions are
        figures = dict(
            segments=len(gen.held),
            send_now=round(release_utility(outlook, 0), 4),
            robot_free_in_s=round(max(0.0, outlook.robot_free_s - now), 4),
        )  # 0: idle now
        if hold_for > 0:
            self.decisions.record(
                now,
                gen.task_id,
                Kind.HELD,
                Reason.HOLD_RULE,
                hold_for=hold_for,
                held=round(release_utility(outlook, hold_for), 4),
                **figures,
            )
        else:
            self.decisions.record(now, gen.task_id, Kind.STREAMED, Reason.HOLD_RULE, **figures)

    def _release_context(self, gen: PlanGeneration) -> None:
        self.estimates.engine_of(gen).release(gen.task_id)
        gen.in_engine = False
        gen.replica = None

    def _end_run(self, gen: PlanGeneration, now: float) -> None:
        if not math.isnan(gen.run_started_s):
            gen.record.gen_intervals.append((gen.run_started_s, now))
            gen.run_started_s = math.nan

    def _on_executing(self, record: TaskRecord, segment: DispatchedSegment) -> None:
        self._emit(record, TaskState.EXECUTING, segment_index=segment.index, segment_text=segment.text)

    # ----------------------------------------------------------------- robot reports
    def segment_started(self, task_id: str, index: int, t: float) -> None:
        gen = self._gens.get(task_id)
        if gen is None or index >= len(gen.record.segments):
            return
        if self.dispatcher.started(gen.record, gen.robot, index, t):
            self._refresh_queued(gen)

    def segment_finished(
        self, task_id: str, index: int, success: bool, call_times_s: list[float], message: str, t: float
    ) -> None:
        gen = self._gens.get(task_id)
        if gen is None or index >= len(gen.record.segments):
            return  # task already terminal (canceled/failed): late reports are ignored
        robot_free_moved = self.dispatcher.finished(gen.record, gen.robot, index, call_times_s, t)
        segment = gen.record.segments[index]
        if not success:
            self._replan(gen, failure_of(gen.record, index, call_times_s, message, t))
            return
        earned, most, first = gen.record.utility, gen.record.max_utility, gen.record.units_executed == 0
        gen.record.account_segment(segment)
        if self.decisions is not None and gen.record.utility - earned < gen.record.max_utility - most - 1e-9:
            self._trace_lost_utility(gen, segment, gen.record.utility - earned, gen.record.max_utility - most, first, t)
        robot_type = gen.record.request.robot_type
        for call, seconds in zip(segment.calls, call_times_s):
            self.exec_samples.append((robot_type, call.skill, call.number, seconds))
        if robot_free_moved:
            self._refresh_queued(gen)
        self._maybe_complete(gen)

    def _trace_lost_utility(
        self, gen: PlanGeneration, segment: DispatchedSegment, earned: float, most: float, first: bool, t: float
    ) -> None:
        """An executed segment's units earned less than their maximum: its first unit late
        (the response, `first`), or the robot waited for a later one."""
        assert self.decisions is not None  # traced only when decisions are
        self.decisions.record(
            t,
            gen.task_id,
            Kind.LOST_UTILITY,
            Reason.LATE_RESPONSE if first else Reason.ROBOT_WAITED,
            segment=segment.index,
            earned=round(earned, 4),
            most=round(most, 4),
            response_s=round(gen.record.response_time_s, 4),
            waiting_s=round(gen.record.waiting_time_s, 4),
        )

    def _replan(self, gen: PlanGeneration, failure: Failure) -> None:
        """The task fails; when its robot failed a call (and not the link: a timeout, a lost
        result), it gets an error follow-up if it may."""
        request = gen.record.request
        what = describe(request.robot_id, failure)
        if not failure.call:
            self._finish(gen, TaskState.FAILED, what)
            return
        gen.record.robot_failure = what
        why_not = refusal(gen.record, self.config.replan, failure.at_s)
        if why_not:
            self._finish(gen, TaskState.FAILED, f"{what}; {why_not}")
            return
        follow_up = follow_up_request(request, failure, self.config.replan_level, gen.skill_set)
        gen.record.followed_by = follow_up.task_id
        if self.decisions is not None:
            self.decisions.record(
                failure.at_s,
                gen.task_id,
                Kind.REPLANNED,
                Reason.ROBOT_FAILURE,
                follow_up=follow_up.task_id,
                failure=what,
            )
        self._finish(gen, TaskState.FAILED, replanned_message(what, follow_up.task_id))
        self.submit(follow_up)

    def _refresh_queued(self, gen: PlanGeneration) -> None:
        if gen.task_id in self.queue and gen.record.segments:
            self._enqueue(gen, self._next_entry(gen), Reason.ROBOT_REPORT)

    def _maybe_complete(self, gen: PlanGeneration) -> None:
        if not gen.plan_done or gen.robot.outstanding > 0 or gen.held:  # held: waiting for an approval
            return
        cut = " (the plan was cut at the engine's token limit)" if gen.truncated else ""
        if gen.robot.calls == 0:
            self._finish(gen, TaskState.FAILED, "the plan holds no executable skill call" + cut)
        else:
            self._finish(gen, TaskState.SUCCEEDED, "all segments executed" + cut)

    # ----------------------------------------------------------------- operators
    def change_tuf(self, task_id: str, urgency_name: str, tuf: Tuf) -> str:
        """Give a queued or running task another urgency level (or TUF of its own); "" on
        success, else why not. It takes effect in the ready queue at once, and units executed
        from then on earn the new TUF."""
        gen = self._gens.get(task_id)
        if gen is None:
            ended = self.records.get(task_id)
            return f"task {task_id!r} has ended ({ended.state.name})" if ended else f"no task {task_id!r}"
        record = gen.record
        record.request = dataclasses.replace(record.request, urgency_name=urgency_name, tuf=tuf)
        if gen.entry is not None:
            unsent = gen.robot.calls == 0
            gen.entry = dataclasses.replace(
                gen.entry, tuf=tuf if unsent else tuf.resumed(), first_deadline_s=record.request.arrival_s + tuf.ert_s
            )
            gen.deadline_s = gen.entry.deadline_s
            if task_id in self.queue:
                self._enqueue(gen, gen.entry, Reason.URGENCY_CHANGED)
        return ""

    def queue_places(self) -> dict[str, tuple[int, float]]:
        """Each queued task's place in the ready queue (1: next) and its priority now."""
        now = self.clock.now()
        return {
            entry.gen_id: (n, self.queue.priority(entry, now)) for n, entry in enumerate(self.queue.in_order(now), 1)
        }

    # ----------------------------------------------------------------- endings
    def cancel(self, task_id: str, reason: str = "canceled") -> bool:
        gen = self._gens.get(task_id)
        if gen is None:
            return False
        self._finish(gen, TaskState.CANCELED, reason)
        return True

    def _finish(self, gen: PlanGeneration, state: TaskState, message: str) -> None:
        self.queue.remove(gen.task_id)
        if self.gate is not None:
            self.gate.forget(gen.task_id)
        if gen.in_engine:
            self._release_context(gen)
        self._end_run(gen, self.clock.now())
        if state != TaskState.SUCCEEDED:
            self.dispatcher.cancel(gen.record, gen.robot)
        del self._gens[gen.task_id]
        self._finish_record(gen.record, state, message)

    def _finish_record(self, record: TaskRecord, state: TaskState, message: str) -> None:
        self.segment_lengths.forget(record.request.task_id)
        record.message = message
        record.finished_s = self.clock.now()
        if self.decisions is not None:
            self.decisions.record(
                record.finished_s,
                record.request.task_id,
                Kind.ENDED,
                Reason(state.name.lower()),
                message=message,
                utility=round(record.utility, 4),
                max_utility=round(record.max_utility, 4),
            )
        self._emit(record, state, message=message, segment_index=len(record.segments))
        if self._keep_finished is not None:
            self._finished.append(record.request.task_id)
            while len(self._finished) > self._keep_finished:
                self.records.pop(self._finished.popleft(), None)

    def _emit(self, record: TaskRecord, state: TaskState, **fields) -> None:
        record.state = state
        if state.terminal and record.units_executed:
            fields.update(
                response_time_s=record.response_time_s, waiting_time_s=record.waiting_time_s, utility=record.utility
            )
        req = record.request
        self._publish(StatusUpdate(req.task_id, req.robot_id, state, self.clock.now(), **fields))

    def _publish(self, update: StatusUpdate) -> None:
        if self.on_status is not None:
            self.on_status(update)

    @property
    def generations(self) -> list[PlanGeneration]:
        """The tasks still planned or executed, in arrival order."""
        return list(self._gens.values())

    @property
    def active_tasks(self) -> int:
        return len(self._gens)
