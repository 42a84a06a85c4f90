import math
import random

import pytest

from llm_planner.domain.tuf import Tuf
from llm_planner.sched.policies import get_policy
from llm_planner.sched.queues import PudQueue, QueueEntry, StaticQueue, bucket_gen_time
from llm_planner.testing.naive_queue import NaiveRebuildQueue

NORMAL, URGENT = Tuf(1, 1, 1.5), Tuf(2, 0.2, 0.5)


def entry(gid, tuf, ref, g=0.2, arrival=None, first_ert=None):
    arrival = ref if arrival is None else arrival
    first_ert = tuf.ert_s if first_ert is None else first_ert
    return QueueEntry(gid, tuf, ref, g, arrival, arrival + first_ert)


@pytest.mark.parametrize("predicted", [False, True], ids=["G per skill set", "G per task"])
@pytest.mark.parametrize("seed", range(40))
def test_pud_queue_picks_exactly_what_a_full_resort_picks(seed, predicted):
    rng = random.Random(seed)
    fast, naive = PudQueue(), NaiveRebuildQueue()
    tufs = [NORMAL, URGENT, NORMAL.resumed(), URGENT.resumed()]
    now = 0.0
    n = 0
    for _ in range(300):
        action = rng.random()
        if action < 0.55 or not len(fast):
            t = rng.choice(tufs)
            ref = now + rng.uniform(-2, 3)
            g = bucket_gen_time(rng.uniform(0.01, 3.0)) if predicted else rng.choice([0.09, 0.234])
            e = entry(f"g{n}", t, ref, g, arrival=ref - rng.uniform(0, 1))
            n += 1
            fast.push(e)
            naive.push(e)
        elif action < 0.65:
            victim = rng.choice(list(naive._entries))
            fast.remove(victim)
            naive.remove(victim)
        else:
            now += rng.uniform(0, 0.5)
            a, b = fast.pop_best(now), naive.pop_best(now)
            assert a.gen_id == b.gen_id
    assert len(fast) == len(naive)


def test_pud_prefers_urgent_then_ties_by_deadline():
    q = PudQueue()
    q.push(entry("normal", NORMAL, 0.0))
    q.push(entry("urgent", URGENT, 0.01))
    assert q.pop_best(0.02).gen_id == "urgent"
    assert q.pop_best(0.02).gen_id == "normal"
    # past their cutoffs both have zero priority: the earlier deadline goes first
    q.push(entry("late-a", NORMAL, -10.0))
    q.push(entry("late-b", NORMAL, -9.0))
    assert q.pop_best(0.02).gen_id == "late-a"


def test_resumed_segment_with_slack_waits_for_new_first_segment():
    q = PudQueue()
    q.push(entry("resumed", NORMAL.resumed(), ref=3.0))  # robot busy for 3 more seconds
    q.push(entry("new", NORMAL, ref=0.0))
    assert q.best(0.0).gen_id == "new"


def test_a_segment_lost_for_the_bound_goes_before_newer_ones_of_its_level():
    """PUD alone serves a lost segment only when nothing that can earn utility waits; with
    lost_wait_s it goes first once lost that long, the longest lost first, but never before a
    segment that can still earn utility and is more important or due to start within the
    lost one's generation time."""
    plain, bounded = PudQueue(), PudQueue(lost_wait_s=5.0)
    for q in (plain, bounded):
        q.push(entry("lost-late", NORMAL, ref=-19.0))  # lost since about -17.7
        q.push(entry("lost-early", NORMAL.resumed(), ref=-30.0))  # TUF_1: lost since about -29.7
        q.push(entry("lost-recently", NORMAL, ref=-3.0))  # lost since about -1.7: within the bound
        q.push(entry("fresh", NORMAL, ref=0.0))
    assert plain.best(0.0).gen_id == "fresh"
    assert [bounded.pop_best(0.0).gen_id for _ in range(2)] == ["lost-early", "lost-late"]
    assert bounded.pop_best(0.0).gen_id == "fresh"  # the last lost one has waited under 5 s
    assert bounded.pop_best(0.0).gen_id == "lost-recently"
    bounded.push(entry("lost", NORMAL, ref=-30.0))
    bounded.push(entry("urgent", URGENT, ref=0.0))
    assert bounded.pop_best(0.0).gen_id == "urgent"  # more important and can still earn utility
    bounded.push(entry("urgent-lost", URGENT, ref=-1.0))  # lost, though for under 5 s
    assert bounded.pop_best(0.0).gen_id == "lost"
    # a segment of its own level that would lose utility by waiting for the lost one's G goes first
    bounded.push(entry("lost", NORMAL, ref=-30.0))
    bounded.push(entry("due", NORMAL, ref=-0.7))  # full utility only if it starts within 0.1 s
    assert bounded.pop_best(0.0).gen_id == "due"
    assert bounded.pop_best(0.0).gen_id == "lost"
    assert PudQueue.lost_since_s(entry("e", NORMAL, ref=0.0, g=0.2)) == pytest.approx(1.3)


def test_static_queues_keep_first_segment_priority():
    fcfs, edf = StaticQueue("arrival"), StaticQueue("first_deadline")
    older_normal = entry("normal", NORMAL.resumed(), ref=5.0, arrival=0.0, first_ert=1.0)  # resumed, arrived first
    newer_urgent = entry("urgent", URGENT, ref=0.5, arrival=0.5)
    for q in (fcfs, edf):
        q.push(older_normal)
        q.push(newer_urgent)
    assert fcfs.best(1.0).gen_id == "normal"  # 0.0 < 0.5
    assert edf.best(1.0).gen_id == "urgent"  # deadline 0.7 < 1.0


def test_predicted_generation_times_fall_on_a_small_grid():
    grid = {bucket_gen_time(g / 1000) for g in range(10, 10_000)}  # 10 ms to 10 s
    assert len(grid) <= 45
    for g in (0.013, 0.25, 1.7, 9.9):
        assert abs(bucket_gen_time(g) / g - 1) < 0.1
    assert bucket_gen_time(0.0) == 0.0


def test_rtlm_queue_runs_short_sure_plans_before_their_deadline_and_huge_ones_last():
    q = StaticQueue("rtlm")
    long_normal = entry("long", NORMAL, ref=0.0, g=3.0)  # deadline 1.0 + G 3.0
    short_normal = entry("short", NORMAL, ref=0.5, g=0.4)  # arrived later: 1.5 + 0.4
    urgent = entry("urgent", URGENT, ref=1.0, g=1.0)  # 1.2 + 1.0
    huge = QueueEntry("huge", URGENT, 0.0, 0.1, 0.0, 0.2, lane=1)  # earliest deadline, offloaded
    for e in (huge, long_normal, short_normal, urgent):
        q.push(e)
    order = [q.pop_best(2.0).gen_id for _ in range(4)]
    assert order == ["short", "urgent", "long", "huge"]
    assert q.priority(short_normal, 0.0) > q.priority(long_normal, 0.0) > q.priority(huge, 0.0)


def test_push_replaces_and_remove_is_idempotent():
    q = PudQueue()
    q.push(entry("a", NORMAL, 0.0))
    q.push(entry("a", URGENT, 0.0))
    assert len(q) == 1 and q.get("a").tuf == URGENT
    assert q.remove("a") is not None and q.remove("a") is None and q.best(0.0) is None


def test_policies_resolve_to_what_the_planner_does():
    from llm_planner.settings.config import FeaturesConfig

    on, off = FeaturesConfig(), FeaturesConfig(keep_running=False, hold=False, shrink=False, bound_wait=False,
                                              importance_guard=False)
    timely = get_policy("timely").behaviour(on)
    assert timely.streams_segments and timely.preemptive and not timely.pauses_after_segment
    assert timely.lost_wait_s == on.lost_wait_s and get_policy("timely").make_queue(timely).lost_wait_s == 40.0
    assert get_policy("timely").behaviour(off).lost_wait_s == math.inf
    assert get_policy("timelyllm-paper").behaviour(on).lost_wait_s == math.inf  # the paper has no bound
    assert timely.holds_segments and timely.shrinks_batch and timely.predicted_lengths
    ablated = get_policy("timely").behaviour(off)  # the ablation's switches turn timely into the paper's mechanics
    assert ablated.pauses_after_segment and not ablated.holds_segments and not ablated.shrinks_batch \
        and not ablated.guards_by_importance
    paper = get_policy("timelyllm-paper").behaviour(on)  # a policy only uses the features it has
    assert paper.pauses_after_segment and paper.latency_guided and not paper.holds_segments
    assert timely.latency_guided and timely.guards_by_importance and not paper.guards_by_importance
    assert not get_policy("timelyllm-paper").behaviour(on, latency_guided_batches=False).latency_guided
    vllm = get_policy("vllm").behaviour(on)
    assert not vllm.streams_segments and not vllm.preemptive and not vllm.pauses_after_segment
    stream = get_policy("vllm-stream").behaviour(on)
    assert stream.streams_segments and not stream.preemptive
    rtlm = get_policy("rtlm").behaviour(on)
    assert not rtlm.streams_segments and not rtlm.preemptive and rtlm.prices_whole_plans and rtlm.predicted_lengths
    with pytest.raises(ValueError, match="unknown policy"):
        get_policy("lifo")


def test_rtlm_consolidates_batches_of_similar_predicted_length():
    import math
    from types import SimpleNamespace

    from llm_planner.sched.batch import BatchController
    from llm_planner.settings.config import BatchConfig, RtlmConfig

    controller = BatchController(BatchConfig(), engine=None, latency_guided=False, preemptive=False,
                                 consolidation=RtlmConfig(batch_size=3, consolidation=math.log(2)))
    plan = lambda tokens: SimpleNamespace(priced_plan_tokens_left=tokens)  # noqa: E731
    batch = [plan(20), plan(30)]  # median 25
    assert controller._consolidates(plan(45), batch)  # within a factor 2
    assert not controller._consolidates(plan(60), batch)
    assert not controller._consolidates(plan(10), batch)
    assert controller._consolidates(plan(500), [])  # an empty batch takes anything
    assert not controller._consolidates(plan(25), batch + [plan(25)])  # b = 3 reached


def _admission_engine():
    """An engine whose step grows with the batch and the prompt tokens it prefills."""
    from types import SimpleNamespace

    return SimpleNamespace(context_tokens=lambda gen_id: 100, kv_free_tokens=lambda: 10_000,
                           prompt_tokens=lambda request: 50,
                           predict_step_s=lambda batch, context, prefill=0, resumes=0:
                           0.0075 * batch + 0.001 * prefill)


def _member(gid, e, deadline_s, in_engine):
    from types import SimpleNamespace

    return SimpleNamespace(task_id=gid, request=None, entry=e, in_engine=in_engine,
                           replica=0 if in_engine else None, tokens=0, seg_tokens=0, expected_segment_tokens=20,
                           typical_segment_tokens=20, deadline_s=deadline_s, priced_plan_tokens_left=20)


def _admits(running, newcomer, guard):
    from llm_planner.sched.batch import BatchController
    from llm_planner.settings.config import BatchConfig

    controller = BatchController(BatchConfig(), _admission_engine(), latency_guided=True, preemptive=True,
                                 guard_by_importance=guard)
    queue = PudQueue()
    queue.push(newcomer.entry)
    selection = controller.select(queue, [running], {running.task_id: running, newcomer.task_id: newcomer}, now=0.0)
    assert controller.deferred == (0 if selection.admitted else 1)
    return bool(selection.admitted)


def test_timely_admission_weighs_importance_through_the_tufs():
    """The paper's admission defers any newcomer whose prefill would make a running segment
    late. `timely`'s weighs what either side loses, each by its own TUF: an urgent task due
    soon joins at once, while an urgent segment whose robot is busy for a while yet, and a
    normal newcomer, lose nothing by waiting and wait."""
    # Alone, the running normal segment (due at 0.2 s) ends at 0.15 s; with a newcomer's
    # prefill and a batch of two, at 0.35 s, 0.3 of its utility lost. A newcomer finishes at
    # 0.35 s if admitted, 0.5 s after waiting: an urgent one due at 0.2 s loses 1.0.
    running = _member("running", entry("running", NORMAL.resumed(), 0.2), deadline_s=0.2, in_engine=True)
    for newcomer_tuf, ref, guard, admitted in ((URGENT, 0.0, False, False), (URGENT, 0.0, True, True),
                                               (URGENT, 0.3, True, False), (NORMAL, 0.0, True, False)):
        newcomer = _member("new", entry("new", newcomer_tuf, ref), deadline_s=ref + newcomer_tuf.ert_s, in_engine=False)
        assert _admits(running, newcomer, guard) == admitted, (newcomer_tuf, ref, guard)


def test_timely_admits_a_newcomer_that_loses_more_by_waiting_than_it_costs_the_running_one():
    """A running normal segment due at 0.3 s ends at 0.15 s alone and at 0.35 s with a newcomer
    (0.1 of its utility lost). A normal newcomer whose own deadline is 0.2 s away loses 0.3 by
    waiting 0.15 s for it: `timely` admits it, the paper's admission defers it. One with time to
    spare loses nothing by waiting and is deferred by both."""
    running = _member("running", entry("running", NORMAL.resumed(), 0.3), deadline_s=0.3, in_engine=True)
    pressed = _member("new", entry("new", NORMAL, -0.8), deadline_s=0.2, in_engine=False)
    assert _admits(running, pressed, guard=True)
    assert not _admits(running, pressed, guard=False)
    relaxed = _member("new", entry("new", NORMAL, 0.0), deadline_s=1.0, in_engine=False)
    assert not _admits(running, relaxed, guard=True)


def test_timely_admission_weighs_the_newcomer_alone_not_the_queue_behind_it():
    """A running normal segment due at 0.3 s loses 0.1 of its utility with a newcomer (as
    above). A newcomer due 0.475 s from now finishes at 0.35 s if admitted and 0.025 s late
    after waiting 0.15 s for the running segment: 0.05 lost, less than the running segment's
    loss, so it waits, however many such generations wait behind it: each is weighed on its
    own, and each waits (summed, a crowd of small waits would outweigh any loss)."""
    from llm_planner.sched.batch import BatchController
    from llm_planner.settings.config import BatchConfig

    running = _member("running", entry("running", NORMAL.resumed(), 0.3), deadline_s=0.3, in_engine=True)
    for queued in (1, 3):
        controller = BatchController(BatchConfig(), _admission_engine(), latency_guided=True, preemptive=True,
                                     guard_by_importance=True)
        queue, gens = PudQueue(), {"running": running}
        for i in range(queued):
            gens[f"new{i}"] = _member(f"new{i}", entry(f"new{i}", NORMAL, -0.525), deadline_s=0.475, in_engine=False)
            queue.push(gens[f"new{i}"].entry)
        selection = controller.select(queue, [running], gens, now=0.0)
        assert not selection.admitted and controller.deferred == queued, queued


def test_a_newcomer_timely_defers_holds_back_no_one_behind_it():
    """A running normal segment due at 0.3 s loses 0.1 of its utility with a newcomer. First in
    the queue, an urgent segment due at 0.5 s loses nothing by waiting for it and waits; behind
    it a normal plan due at 0.4 s would lose 0.2 by waiting, and `timely` admits it. The
    paper's admission stops at the first newcomer that does not fit and admits neither."""
    from llm_planner.sched.batch import BatchController
    from llm_planner.settings.config import BatchConfig

    running = _member("running", entry("running", NORMAL.resumed(), 0.3), deadline_s=0.3, in_engine=True)
    spare = _member("spare", entry("spare", URGENT, 0.3), deadline_s=0.5, in_engine=False)
    pressed = _member("pressed", entry("pressed", NORMAL, -0.6), deadline_s=0.4, in_engine=False)
    for guard, admitted in ((True, ["pressed"]), (False, [])):
        controller = BatchController(BatchConfig(), _admission_engine(), latency_guided=True, preemptive=True,
                                     guard_by_importance=guard)
        queue = PudQueue()
        queue.push(spare.entry)
        queue.push(pressed.entry)
        assert [e.gen_id for e in queue.in_order(0.0)] == ["spare", "pressed"]
        selection = controller.select(queue, [running], {"running": running, "spare": spare, "pressed": pressed},
                                      now=0.0)
        assert [e.gen_id for e in selection.admitted] == admitted and "spare" in queue, guard
        assert controller.deferred == 1


def test_timely_admission_weighs_what_a_late_running_segment_still_loses():
    """A running normal segment was due 0.25 s ago and still earns: alone it ends at 0.15 s
    (0.2 of its utility left), with a newcomer at 0.35 s (none), so the newcomer's company costs
    it 0.2. A newcomer due at 0.35 s loses 0.3 by waiting the 0.15 s for it and joins; one due
    at 0.45 s loses 0.1 and waits. The paper's admission sees no deadline missed (the segment
    is late either way) and admits both."""
    late = _member("late", entry("late", NORMAL.resumed(), -0.25), deadline_s=-0.25, in_engine=True)
    for due, guard, admitted in ((0.35, True, True), (0.45, True, False), (0.45, False, True)):
        newcomer = _member("new", entry("new", NORMAL, due - NORMAL.ert_s), deadline_s=due, in_engine=False)
        assert _admits(late, newcomer, guard) == admitted, (due, guard)


def test_an_urgent_newcomer_that_loses_by_waiting_joins_however_much_normal_segments_lose():
    """Three running normal segments due at 0.2 s end at 0.45 s alone and at 0.65 s with a
    newcomer: 0.4 of utility lost each, 1.2 in all. An urgent plan's next segment, done at 0.65
    s if it joins and at 1.1 s after waiting for them, whose robot is free at 1.05 s, would lose
    0.33 by waiting: it joins all the same, for what less important segments lose never holds
    back a newcomer that loses by waiting. One whose robot is free at 1.15 s loses nothing by
    waiting and waits for them."""
    from llm_planner.sched.batch import BatchController
    from llm_planner.settings.config import BatchConfig

    running = [_member(f"n{i}", entry(f"n{i}", NORMAL.resumed(), 0.2), deadline_s=0.2, in_engine=True)
               for i in range(3)]
    for ref, admitted in ((1.05, True), (1.15, False)):
        newcomer = _member("new", entry("new", URGENT.resumed(), ref), deadline_s=ref, in_engine=False)
        controller = BatchController(BatchConfig(), _admission_engine(), latency_guided=True, preemptive=True,
                                     guard_by_importance=True)
        queue = PudQueue()
        queue.push(newcomer.entry)
        gens = {g.task_id: g for g in [*running, newcomer]}
        selection = controller.select(queue, running, gens, now=0.0)
        assert bool(selection.admitted) == admitted, ref


def test_timely_admission_prices_the_running_segment_at_its_typical_length():
    """A running normal segment due at 0.2 s is expected at 20 tokens (l_max): alone it ends
    at 0.15 s, with a newcomer at 0.35 s, late. Its skill set's segments take 2 tokens, which
    end at 0.08 s even with the newcomer: `timely` admits a newcomer with time to spare at
    once, the paper's admission (priced at l_max) defers it."""
    relaxed = _member("new", entry("new", NORMAL, 0.0), deadline_s=1.0, in_engine=False)
    for typical, guard, admitted in ((2, True, True), (2, False, False), (20, True, False)):
        running = _running("running", entry("running", NORMAL.resumed(), 0.2), deadline_s=0.2, typical=typical)
        assert _admits(running, relaxed, guard) == admitted, (typical, guard)


def _engine_stepping(step_per_sequence_s):
    """What the batch controller reads of an engine whose step grows linearly with the batch."""
    from types import SimpleNamespace

    return SimpleNamespace(context_tokens=lambda gen_id: 100, kv_free_tokens=lambda: 10_000,
                           prompt_tokens=lambda request: 50,
                           predict_step_s=lambda batch, context, prefill=0, resumes=0:
                           step_per_sequence_s * max(1, batch))


def _running(gid, e, deadline_s, typical=20):
    """A generation in the engine whose current segment is expected at 20 tokens (l_max), and
    whose skill set's segments have taken `typical` tokens on average."""
    from types import SimpleNamespace

    return SimpleNamespace(task_id=gid, request=None, entry=e, in_engine=True, replica=0, tokens=5, seg_tokens=0,
                           expected_segment_tokens=20, typical_segment_tokens=typical, deadline_s=deadline_s,
                           priced_plan_tokens_left=20)


def test_a_segment_hopeless_at_its_expected_length_is_shrunk_for_where_its_typical_length_would_earn():
    """The urgent segment is expected at 20 tokens (l_max), which misses its 0.5 s cutoff at
    either batch size; its skill set's segments have taken 5, which only the smaller batch
    makes in time. So the normal generation that can wait is suspended for it, and kept out
    while it decodes; once its typical length cannot come before the cutoff, nothing is."""
    from llm_planner.sched.batch import BatchController
    from llm_planner.settings.config import BatchConfig

    engine = _engine_stepping(step_per_sequence_s=0.06)

    def select(now):
        urgent = _running("urgent", entry("urgent", URGENT, 0.0), deadline_s=0.2, typical=5)
        normal = _running("normal", entry("normal", NORMAL, 30.0), deadline_s=31.0)  # its robot is busy for 30 s
        controller = BatchController(BatchConfig(max_batch_size=2), engine, latency_guided=False, preemptive=True,
                                     shrink=True)
        queue = PudQueue()
        gens = {"urgent": urgent, "normal": normal}
        first = controller.select(queue, [urgent, normal], gens, now=now)
        queue.push(normal.entry)
        urgent.seg_tokens = 2
        kept_out = not controller.select(queue, [urgent], gens, now=now + 0.12).admitted
        return first.shrunk == [normal], kept_out

    assert select(now=0.0) == (True, True)
    assert select(now=0.45) == (False, False)  # 5 tokens alone end past the cutoff


def test_a_segment_done_in_time_at_its_typical_length_is_not_shrunk_for():
    """At 20 tokens (l_max) the urgent segment would be late in a batch of two and in time
    alone, but its skill set's segments have taken 4 tokens, in time at either size: the
    normal generation keeps running (a suspension and its resume would buy nothing)."""
    from llm_planner.sched.batch import BatchController
    from llm_planner.settings.config import BatchConfig

    engine = _engine_stepping(step_per_sequence_s=0.0075)
    shrunk = {}
    for typical in (20, 4):
        urgent = _running("urgent", entry("urgent", URGENT, 0.0), deadline_s=0.2, typical=typical)
        normal = _running("normal", entry("normal", NORMAL, 9.0), deadline_s=10.0)  # its robot is busy for 9 s
        controller = BatchController(BatchConfig(max_batch_size=2), engine, latency_guided=False, preemptive=True,
                                     shrink=True)
        selection = controller.select(PudQueue(), [urgent, normal], {"urgent": urgent, "normal": normal}, now=0.0)
        shrunk[typical] = [g.task_id for g in selection.shrunk]
    assert shrunk == {20: ["normal"], 4: []}


def test_an_urgent_segment_already_lost_does_not_hide_one_that_still_earns_from_the_shrink():
    """Two urgent segments and a normal one whose robot is busy decode in a batch of three at
    0.09 s a step. One urgent segment was due long ago and earns nothing whatever the batch;
    the other, at its 5 typical tokens, ends at 0.45 s in this batch (a sixth of its utility)
    and at 0.3 s in a batch of two (two thirds). The normal generation is suspended for the one
    that still earns, though the lost one's deadline is earlier."""
    from llm_planner.sched.batch import BatchController
    from llm_planner.settings.config import BatchConfig

    lost = _running("lost", entry("lost", URGENT, -5.0), deadline_s=-4.8, typical=5)
    earning = _running("earning", entry("earning", URGENT, 0.0), deadline_s=0.2, typical=5)
    normal = _running("normal", entry("normal", NORMAL, 9.0), deadline_s=10.0)  # its robot is busy for 9 s
    controller = BatchController(BatchConfig(max_batch_size=3), _engine_stepping(step_per_sequence_s=0.03),
                                 latency_guided=False, preemptive=True, shrink=True)
    gens = {g.task_id: g for g in (lost, earning, normal)}
    selection = controller.select(PudQueue(), [lost, earning, normal], gens, now=0.0)
    assert [g.task_id for g in selection.shrunk] == ["normal"]


def test_timely_never_preempts_a_running_urgent_segment_for_a_normal_one_while_waiting_would_cost_it():
    """A full batch of one urgent generation whose segment, priced at l_max (G 0.6 s against
    its 0.5 s cutoff), PUD ranks below a queued normal one. The paper's preemption swaps the
    urgent one out; `timely`'s keeps it where its skill set's segments take 3 tokens (in time
    now, lost after the normal segment), and not where they take 20 (lost either way)."""
    from llm_planner.sched.batch import BatchController
    from llm_planner.settings.config import BatchConfig

    engine = _engine_stepping(step_per_sequence_s=0.06)
    preempted = {}
    for guard, typical in ((False, 3), (True, 3), (True, 20)):
        urgent = _running("urgent", entry("urgent", URGENT, 0.0, g=0.6), deadline_s=0.2, typical=typical)
        normal = _running("normal", entry("normal", NORMAL, 0.0), deadline_s=1.0)
        normal.in_engine = False
        queue = PudQueue()
        queue.push(normal.entry)
        assert queue.priority(normal.entry, 0.0) > queue.priority(urgent.entry, 0.0)
        controller = BatchController(BatchConfig(max_batch_size=1), engine, latency_guided=False, preemptive=True,
                                     guard_by_importance=guard)
        selection = controller.select(queue, [urgent], {"urgent": urgent, "normal": normal}, now=0.0)
        preempted[guard, typical] = [g.task_id for g in selection.preempted]
    assert preempted == {(False, 3): ["urgent"], (True, 3): [], (True, 20): ["urgent"]}


def test_timely_swaps_equally_important_generations_only_where_the_newcomer_would_earn():
    """A full batch of one normal generation whose segment is past its cutoff (PUD 0) and a
    queued normal one just arrived, on time at its G of 0.2 s. The paper's preemption swaps them
    at any step time. `timely`'s does where the newcomer's 20 tokens end before its 1.5 s cutoff
    at this batch's step (0.05 s a token: 1.0 s), and not where they would not (0.1 s: 2.0 s),
    as in a saturated engine: the swap would cost a resume and earn nothing."""
    from llm_planner.sched.batch import BatchController
    from llm_planner.settings.config import BatchConfig

    preempted = {}
    for guard, step_s in ((False, 0.1), (True, 0.05), (True, 0.1)):
        late = _running("late", entry("late", NORMAL.resumed(), -5.0), deadline_s=-5.0)
        fresh = _running("fresh", entry("fresh", NORMAL, 0.0), deadline_s=1.0)
        fresh.in_engine, fresh.tokens = False, 0
        queue = PudQueue()
        queue.push(fresh.entry)
        assert queue.priority(late.entry, 0.0) == 0 < queue.priority(fresh.entry, 0.0)
        controller = BatchController(BatchConfig(max_batch_size=1), _engine_stepping(step_s), latency_guided=False,
                                     preemptive=True, guard_by_importance=guard)
        selection = controller.select(queue, [late], {"late": late, "fresh": fresh}, now=0.0)
        preempted[guard, step_s] = [g.task_id for g in selection.preempted]
    assert preempted == {(False, 0.1): ["late"], (True, 0.05): ["late"], (True, 0.1): []}


def test_a_shrink_for_a_segment_just_admitted_counts_its_prompts_prefill():
    """An urgent task admitted into a batch of one: decoding its 5 typical tokens alone would
    save it half its utility, but its prompt's prefill comes first in the next iteration at
    either batch size, and after that the segment is past its cutoff either way, so nothing
    is suspended for it."""
    from types import SimpleNamespace

    from llm_planner.sched.batch import BatchController
    from llm_planner.settings.config import BatchConfig

    shrunk = {}
    for prefill_s_per_token in (0.0, 0.008):  # 55 tokens: 0.44 s
        engine = SimpleNamespace(context_tokens=lambda gen_id: 100, kv_free_tokens=lambda: 10_000,
                                 prompt_tokens=lambda request: 50,
                                 predict_step_s=lambda batch, context, prefill=0, resumes=0, rate=prefill_s_per_token:
                                 0.03 * max(1, batch) + rate * prefill)
        urgent = _running("urgent", entry("urgent", URGENT, 0.0), deadline_s=0.2, typical=5)
        urgent.in_engine, urgent.replica = False, None  # queued: its prompt is prefilled when it joins
        normal = _running("normal", entry("normal", NORMAL, 9.0), deadline_s=10.0)  # its robot is busy for 9 s
        controller = BatchController(BatchConfig(max_batch_size=2), engine, latency_guided=False, preemptive=True,
                                     shrink=True)
        queue = PudQueue()
        queue.push(urgent.entry)
        selection = controller.select(queue, [normal], {"urgent": urgent, "normal": normal}, now=0.0)
        assert [e.gen_id for e in selection.admitted] == ["urgent"]
        shrunk[prefill_s_per_token] = [g.task_id for g in selection.shrunk]
    assert shrunk == {0.0: ["normal"], 0.008: []}


def test_an_urgent_newcomer_is_priced_at_the_batch_the_shrink_leaves_it():
    """Two normal segments run: one due now, at risk in a bigger batch, and one whose robot is
    busy for 9 s. An urgent task of 5 typical tokens would end at 0.6 s in a batch of three,
    past its 0.5 s cutoff, and at 0.4 s once the shrink suspends the one that can wait for it.
    Priced at the batch it decodes in, it joins at once (and the idle one is suspended);
    without shrinking it is lost either way and waits for the segment at risk."""
    from llm_planner.sched.batch import BatchController
    from llm_planner.settings.config import BatchConfig

    outcome = {}
    for shrink in (True, False):
        urgent = _running("urgent", entry("urgent", URGENT, 0.0), deadline_s=0.2, typical=5)
        urgent.in_engine, urgent.replica = False, None
        pressed = _running("pressed", entry("pressed", NORMAL.resumed(), 0.2), deadline_s=0.2, typical=5)
        idle = _running("idle", entry("idle", NORMAL, 9.0), deadline_s=10.0, typical=5)
        controller = BatchController(BatchConfig(max_batch_size=4), _engine_stepping(step_per_sequence_s=0.04),
                                     latency_guided=True, preemptive=True, shrink=shrink, guard_by_importance=True)
        queue = PudQueue()
        queue.push(urgent.entry)
        selection = controller.select(queue, [pressed, idle], {g.task_id: g for g in (urgent, pressed, idle)},
                                      now=0.0)
        outcome[shrink] = ([e.gen_id for e in selection.admitted], [g.task_id for g in selection.shrunk])
    assert outcome == {True: (["urgent"], ["idle"]), False: ([], [])}

    # Generations admitted earlier in the same decision stay beside the newcomer (the shrink
    # suspends only those running before it): a new one, not yet in the engine, and a resumed
    # one, whose context is there. The urgent one is priced in a batch of four: 0.12 s a step.
    from llm_planner.sched.batch import _Decision

    engine = _engine_stepping(step_per_sequence_s=0.03)
    engine.context_tokens = {"pressed": 100, "resumed": 100}.__getitem__
    fresh = _running("fresh", entry("fresh", NORMAL, 9.0), deadline_s=10.0, typical=5)
    fresh.in_engine, fresh.replica = False, None
    resumed = _running("resumed", entry("resumed", NORMAL, 9.0), deadline_s=10.0, typical=5)
    controller = BatchController(BatchConfig(max_batch_size=4), engine, latency_guided=True, preemptive=True,
                                 shrink=True, guard_by_importance=True)
    decision = _Decision(earns_alone={}, suspendable=[pressed])
    steps = controller._newcomer_steps([pressed, fresh, resumed], 250, 50, 0, urgent, now=0.0, decision=decision)
    assert steps == pytest.approx((0.12, 0.12))


def test_a_batch_shrunk_for_an_urgent_generation_stays_shrunk_while_it_runs_alone():
    """Once every generation that could wait is suspended and the urgent one decodes alone,
    the suspended ones stay out (they can still wait) while their return would cost it
    utility: they do not come straight back to slow it down again, and they return once its
    segment has slack."""
    from llm_planner.sched.batch import BatchController
    from llm_planner.settings.config import BatchConfig

    engine = _engine_stepping(step_per_sequence_s=0.0075)

    urgent = _running("urgent", entry("urgent", URGENT, 0.0), deadline_s=0.2)
    normal = _running("normal", entry("normal", NORMAL, 9.0), deadline_s=10.0)  # its robot is busy for 9 s
    gens = {"urgent": urgent, "normal": normal}
    controller = BatchController(BatchConfig(max_batch_size=2), engine, latency_guided=False, preemptive=True,
                                 shrink=True)
    queue = PudQueue()
    first = controller.select(queue, [urgent, normal], gens, now=0.0)
    assert first.shrunk == [normal] and not first.admitted
    queue.push(normal.entry)  # what the planner does with a suspended generation
    alone = controller.select(queue, [urgent], gens, now=0.01)
    assert not alone.admitted and not alone.preempted and "normal" in queue
    urgent.entry, urgent.deadline_s = entry("urgent", URGENT.resumed(), 5.0), 5.3  # its next segment has slack
    later = controller.select(queue, [urgent], gens, now=0.2)
    assert [e.gen_id for e in later.admitted] == ["normal"]  # keeping it out no longer pays


def test_a_less_important_newcomer_waits_while_its_company_would_slow_an_urgent_segment():
    """An urgent segment of 20 tokens due at 0.2 s is in time alone (0.15 s) and late in a
    batch of two (0.3 s). A normal task whose robot is busy for 9 s can wait for it, so it is
    not admitted (it would be prefilled only to be suspended the next iteration); one that
    has waited 0.9 s of its 1 s cannot wait and joins; once the urgent segment has slack, the
    first joins too."""
    from llm_planner.sched.batch import BatchController
    from llm_planner.settings.config import BatchConfig

    engine = _engine_stepping(step_per_sequence_s=0.0075)

    def admitted(normal_ref, urgent_slack=False):
        urgent = _running("urgent", entry("urgent", URGENT, 0.0), deadline_s=0.2)
        if urgent_slack:  # a later segment, due in 5 s
            urgent.entry, urgent.deadline_s = entry("urgent", URGENT.resumed(), 5.0), 5.3
        normal = _running("normal", entry("normal", NORMAL, normal_ref), deadline_s=normal_ref + 1.0)
        normal.in_engine, normal.replica = False, None
        controller = BatchController(BatchConfig(max_batch_size=4), engine, latency_guided=False, preemptive=True,
                                     shrink=True)
        queue = PudQueue()
        queue.push(normal.entry)
        selection = controller.select(queue, [urgent], {"urgent": urgent, "normal": normal}, now=0.0)
        return [e.gen_id for e in selection.admitted]

    assert admitted(normal_ref=9.0) == []
    assert admitted(normal_ref=-0.9) == ["normal"]
    assert admitted(normal_ref=9.0, urgent_slack=True) == ["normal"]


def test_a_generation_whose_segment_may_still_end_in_time_is_not_suspended_as_if_it_were_lost():
    """An urgent segment of typically 8 tokens is late in a batch of two and in time alone.
    A normal first segment due in 0.1 s, expected at 20 tokens (0.8 s here, past its cutoff
    whether it waits or not), may end at its next token: suspending it could cost it its
    unit, so it stays. One whose robot is busy for 9 s is suspended."""
    from llm_planner.sched.batch import BatchController
    from llm_planner.settings.config import BatchConfig

    engine = _engine_stepping(step_per_sequence_s=0.02)

    def shrunk(normal_ref):
        urgent = _running("urgent", entry("urgent", URGENT, 0.0), deadline_s=0.2, typical=8)
        normal = _running("normal", entry("normal", NORMAL, normal_ref), deadline_s=normal_ref + 1.0)
        controller = BatchController(BatchConfig(max_batch_size=4), engine, latency_guided=False, preemptive=True,
                                     shrink=True)
        selection = controller.select(PudQueue(), [urgent, normal], {"urgent": urgent, "normal": normal}, now=0.0)
        return [g.task_id for g in selection.shrunk]

    assert shrunk(normal_ref=-0.9) == []
    assert shrunk(normal_ref=9.0) == ["normal"]


def test_generations_kept_out_for_an_urgent_segment_stay_out_for_the_next_one_they_would_slow():
    """Two urgent generations decode; the normal one suspended for the first stays out when
    that one's segment ends, since its return would slow the second (it does not come back
    only to be suspended again), and returns once no urgent segment is at risk."""
    from llm_planner.sched.batch import BatchController
    from llm_planner.settings.config import BatchConfig

    engine = _engine_stepping(step_per_sequence_s=0.0075)
    first = _running("first", entry("first", URGENT, 0.0), deadline_s=0.2)
    second = _running("second", entry("second", URGENT, 0.0), deadline_s=0.3)
    normal = _running("normal", entry("normal", NORMAL, 9.0), deadline_s=10.0)  # its robot is busy for 9 s
    gens = {"first": first, "second": second, "normal": normal}
    controller = BatchController(BatchConfig(max_batch_size=3), engine, latency_guided=False, preemptive=True,
                                 shrink=True)
    queue = PudQueue()
    assert controller.select(queue, [first, second, normal], gens, now=0.0).shrunk == [normal]
    queue.push(normal.entry)
    assert not controller.select(queue, [second], gens, now=0.05).admitted
    second.entry, second.deadline_s = entry("second", URGENT.resumed(), 5.0), 5.3  # its next segment has slack
    assert [e.gen_id for e in controller.select(queue, [second], gens, now=0.1).admitted] == ["normal"]


def _traced_select(running, queued, guard):
    """One admission decision with the decision trace on: (selection, the decisions)."""
    from llm_planner.domain.decisions import DecisionTrace
    from llm_planner.sched.batch import BatchController
    from llm_planner.settings.config import BatchConfig

    controller = BatchController(BatchConfig(), _admission_engine(), latency_guided=True, preemptive=True,
                                 guard_by_importance=guard)
    controller.trace = DecisionTrace()
    queue = PudQueue()
    for gen in queued:
        queue.push(gen.entry)
    gens = {g.task_id: g for g in [running, *queued]}
    return controller.select(queue, [running], gens, now=0.0), controller.trace.decisions


def test_the_trace_names_the_latency_guided_rule_that_defers_a_normal_newcomer():
    """The running normal segment loses 0.1 in a newcomer's company; a normal newcomer with time
    to spare loses nothing by waiting: deferred by the latency-guided rule, which names the
    segment at risk and both losses."""
    from llm_planner.domain.decisions import Kind, Reason

    running = _member("running", entry("running", NORMAL.resumed(), 0.3), deadline_s=0.3, in_engine=True)
    relaxed = _member("new", entry("new", NORMAL, 0.0), deadline_s=1.0, in_engine=False)
    selection, decisions = _traced_select(running, [relaxed], guard=True)
    assert not selection.admitted
    [deferred] = decisions
    assert (deferred.task_id, deferred.kind, deferred.reason) == ("new", Kind.DEFERRED, Reason.LATENCY_GUIDED)
    assert deferred.figures["at_risk"] == "running"
    assert deferred.figures["own_loss"] == 0 and deferred.figures["weighed_loss"] == pytest.approx(0.1, abs=1e-3)
    from llm_planner.lrtrace.explain import describe, timeline

    [line] = [describe(step) for step in timeline(decisions, "new")]  # what `lrtrace explain --task new` prints
    assert "deferred     latency_guided    at_risk=running own_loss=0 weighed_loss=0.1" in line


def test_the_trace_shows_the_importance_guard_letting_an_urgent_newcomer_in():
    """The urgent newcomer due at 0.2 s loses 1.0 by waiting, more than the running normal
    segment's 0.3, which it does not wait for (a less important loss never holds back an urgent
    task that loses by waiting): `timely` admits it and says why; the paper's rule defers it to keep the
    running deadline, and the one queued behind it waits behind it."""
    from llm_planner.domain.decisions import Kind, Reason

    running = _member("running", entry("running", NORMAL.resumed(), 0.2), deadline_s=0.2, in_engine=True)
    urgent = _member("new", entry("new", URGENT, 0.0), deadline_s=URGENT.ert_s, in_engine=False)
    selection, decisions = _traced_select(running, [urgent], guard=True)
    [admitted] = decisions
    assert [e.gen_id for e in selection.admitted] == ["new"]
    assert (admitted.kind, admitted.reason) == (Kind.ADMITTED, Reason.IMPORTANCE_GUARD)
    assert admitted.figures["own_loss"] == pytest.approx(1.0, abs=1e-3) and admitted.figures["weighed_loss"] == 0
    assert admitted.figures["running_loss"] == pytest.approx(0.3, abs=1e-3) and admitted.figures["batch"] == 2
    from llm_planner.lrtrace.explain import describe, timeline

    [line] = [describe(step) for step in timeline(decisions, "new")]
    assert "admitted     importance_guard  replica=0 batch=2" in line and "own_loss=1.0" in line

    later = _member("later", entry("later", NORMAL, 0.5), deadline_s=1.5, in_engine=False)
    selection, decisions = _traced_select(running, [urgent, later], guard=False)
    assert not selection.admitted
    assert [(d.task_id, d.kind, d.reason) for d in decisions] == [
        ("new", Kind.DEFERRED, Reason.KEEP_DEADLINES), ("later", Kind.DEFERRED, Reason.BEHIND)]
    assert decisions[1].figures["stopped_at"] == "new"
