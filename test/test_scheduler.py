import random

import pytest
from naive_queue import NaiveRebuildQueue

from llm_planner.domain.tuf import Tuf
from llm_planner.sched.queues import PudQueue, QueueEntry, StaticQueue, get_policy

NORMAL, URGENT = Tuf(1, 1, 1.5), Tuf(2, 0.2, 0.5)


def entry(gid, tuf, ref, g=0.2, arrival=None, first_ert=None):
    arrival = ref if arrival is None else arrival
    first_ert = tuf.ert_s if first_ert is None else first_ert
    return QueueEntry(gid, tuf, ref, g, arrival, arrival + first_ert)


@pytest.mark.parametrize("seed", range(40))
def test_pud_queue_picks_exactly_what_a_full_resort_picks(seed):
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
            e = entry(f"g{n}", t, ref, rng.choice([0.09, 0.234]), arrival=ref - rng.uniform(0, 1))
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


def test_static_queues_keep_first_segment_priority():
    fcfs, edf = StaticQueue("arrival"), StaticQueue("first_deadline")
    older_normal = entry("normal", NORMAL.resumed(), ref=5.0, arrival=0.0, first_ert=1.0)  # resumed, arrived first
    newer_urgent = entry("urgent", URGENT, ref=0.5, arrival=0.5)
    for q in (fcfs, edf):
        q.push(older_normal)
        q.push(newer_urgent)
    assert fcfs.best(1.0).gen_id == "normal"  # 0.0 < 0.5
    assert edf.best(1.0).gen_id == "urgent"  # deadline 0.7 < 1.0


def test_push_replaces_and_remove_is_idempotent():
    q = PudQueue()
    q.push(entry("a", NORMAL, 0.0))
    q.push(entry("a", URGENT, 0.0))
    assert len(q) == 1 and q.get("a").tuf == URGENT
    assert q.remove("a") is not None and q.remove("a") is None and q.best(0.0) is None


def test_policies():
    assert get_policy("timely").suspend and get_policy("timely").segmented
    assert not get_policy("vllm").segmented
    assert get_policy("vllm-stream").segmented and not get_policy("vllm-stream").suspend
    with pytest.raises(ValueError, match="unknown policy"):
        get_policy("lifo")
