"""Scheduling cost per decision: PudQueue (timely) vs the reference approach of rebuilding and
re-sorting the whole queue on every pick (NaiveRebuildQueue), measured side by side.

A decision = pick the best generation at the current time and take it out of the queue; the
taken entry is pushed back (as a resumed segment) so the queue keeps its size. Two kinds of
entries: G per skill set (the default, `predictor: none`), and G per task from the length
predictor (log-uniform 0.05-2 s, on the queue's grid, `predictor: auto`).
Usage: python benchmarks/scheduling_cost.py [--sizes 1,8,100,1000] [--decisions 2000]
"""

from __future__ import annotations

import argparse
import random
import time

from llm_planner.domain.tuf import Tuf
from llm_planner.sched.queues import PudQueue, QueueEntry, bucket_gen_time
from llm_planner.testing.bench_result import write_bench_result
from llm_planner.testing.naive_queue import NaiveRebuildQueue

NORMAL, URGENT = Tuf(1.0, 1.0, 1.5), Tuf(2.0, 0.2, 0.5)
G_FIRST, G_RESUMED = 0.234, 0.223  # drone segment estimates from the default engine profile


def make_entry(rng: random.Random, i: int, now: float, predicted: bool) -> QueueEntry:
    tuf = URGENT if rng.random() < 3 / 8 else NORMAL
    first = rng.random() < 0.3  # a new task: first segment, arrived within the last second
    gen_time = bucket_gen_time(10 ** rng.uniform(-1.3, 0.3)) if predicted else G_FIRST if first else G_RESUMED
    if first:
        arrival = now - rng.uniform(0, 1.0)
        return QueueEntry(f"g{i}", tuf, arrival, gen_time, arrival, arrival + tuf.ert_s)
    arrival = now - rng.uniform(0, 10)
    ref = now + rng.uniform(-0.5, 4.0)  # robot busy with the previous segment for a while
    return QueueEntry(f"g{i}", tuf.resumed(), ref, gen_time, arrival, arrival + tuf.ert_s)


def per_decision_us(queue_cls, size: int, decisions: int, seed: int, predicted: bool) -> tuple[float, list[str]]:
    rng = random.Random(seed)
    queue = queue_cls()
    now = 100.0
    for i in range(size):
        queue.push(make_entry(rng, i, now, predicted))
    picks = []
    elapsed = 0.0
    for d in range(decisions):
        now += 0.02  # one engine step later
        t0 = time.perf_counter()
        entry = queue.pop_best(now)
        elapsed += time.perf_counter() - t0
        picks.append(entry.gen_id)
        queue.push(make_entry(rng, size + d, now, predicted))
    return elapsed / decisions * 1e6, picks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1,8,100,1000")
    parser.add_argument("--decisions", type=int, default=2000)
    parser.add_argument("--json", help="result file (default out/bench/scheduling_cost.json)")
    args = parser.parse_args()
    figures, ratios = {}, {}
    for predicted in (False, True):
        print("G per task from the predictor (on the queue's grid)" if predicted else "G per skill set")
        print(f"{'queued':>7} {'timely PudQueue us':>19} {'naive rebuild us':>17} {'ratio':>7}  same picks")
        for size in (int(s) for s in args.sizes.split(",")):
            decisions = args.decisions if size <= 100 else max(200, args.decisions // 5)
            pud, picks_a = per_decision_us(PudQueue, size, decisions, size, predicted)
            naive, picks_b = per_decision_us(NaiveRebuildQueue, size, decisions, size, predicted)
            print(f"{size:>7} {pud:>19.1f} {naive:>17.1f} {naive / pud:>6.1f}x  {picks_a == picks_b}")
            key = f"{'predicted' if predicted else 'fixed'}_g/{size}_queued"
            figures[key] = {"pud_queue_us": round(pud, 2), "naive_rebuild_us": round(naive, 2),
                            "same_picks": picks_a == picks_b}
            ratios[f"{key}/naive_over_pud"] = round(naive / pud, 2)
    write_bench_result(args.json, "scheduling_cost", figures, ratios,
                       "microseconds per scheduling decision, PudQueue vs rebuilding and re-sorting the queue")


if __name__ == "__main__":
    main()
