"""Scheduling cost per decision: PudQueue (timely) vs the reference approach of rebuilding and
re-sorting the whole queue on every pick (NaiveRebuildQueue), measured side by side.

A decision = pick the best generation at the current time and take it out of the queue; the
taken entry is pushed back (as a resumed segment) so the queue keeps its size. Two kinds of
entries: G per skill set (the default, `predictor: none`), and G per task from the length
predictor (log-uniform 0.05-2 s, on the queue's grid, `predictor: auto`).

Then the decision trace's cost: a whole simulated workload (WID2, `timely`) with the trace
off and on, runs alternating. It prints the planner's batch decision (each iteration's
admissions, preemptions and shrinking) in microseconds and the whole run's wall time, each on over off.
Usage: python benchmarks/scheduling_cost.py [--sizes 1,8,100,1000] [--decisions 2000] [--trace-runs 5]
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

from llm_planner.domain.tuf import Tuf
from llm_planner.lrtrace.composer import compose_preset, load_preset, mean_exec_times, preset_traces
from llm_planner.lrtrace.simulate import simulate
from llm_planner.settings.config import load_planner_config
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


def traced_run(workload, traces, config, trace: bool) -> tuple[float, float, int]:
    """(microseconds per batch decision, wall seconds, decisions traced) of one simulated run."""
    t0 = time.perf_counter()
    result = simulate(workload, traces, "timely", config, 0, trace_decisions=trace)
    return result.admission_us, time.perf_counter() - t0, len(result.trace.decisions) if trace else 0


def trace_cost(runs: int) -> tuple[dict, dict]:
    config = load_planner_config()
    traces = preset_traces(load_preset("wid2"))
    workload = compose_preset(load_preset("wid2"), 0, traces, mean_exec_times(traces, config.robot_types))
    traced_run(workload, traces, config, False)  # warm caches (tokenizer, grammar, skill sets)
    off, on = [], []
    for _ in range(runs):
        off.append(traced_run(workload, traces, config, False))
        on.append(traced_run(workload, traces, config, True))
    decision_off, decision_on = (statistics.median(r[0] for r in x) for x in (off, on))
    wall_off, wall_on = (statistics.median(r[1] for r in x) for x in (off, on))
    print(f"decision trace, WID2 under timely, median of {runs} runs each, alternating:")
    print(f"{'':>8} {'decision us':>12} {'run wall s':>11}")
    print(f"{'off':>8} {decision_off:>12.1f} {wall_off:>11.3f}")
    print(f"{'on':>8} {decision_on:>12.1f} {wall_on:>11.3f}   ({on[0][2]} decisions traced)")
    print(f"{'on/off':>8} {decision_on / decision_off:>11.3f}x {wall_on / wall_off:>10.3f}x")
    figures = {"trace/decision_off_us": round(decision_off, 2), "trace/decision_on_us": round(decision_on, 2),
               "trace/run_off_s": round(wall_off, 4), "trace/run_on_s": round(wall_on, 4),
               "trace/decisions": on[0][2]}
    ratios = {"trace/decision_on_over_off": round(decision_on / decision_off, 3),
              "trace/run_on_over_off": round(wall_on / wall_off, 3)}
    return figures, ratios


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1,8,100,1000")
    parser.add_argument("--decisions", type=int, default=2000)
    parser.add_argument("--trace-runs", type=int, default=5, help="runs each with the decision trace off and on")
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
    if args.trace_runs > 0:
        trace_figures, trace_ratios = trace_cost(args.trace_runs)
        figures.update(trace_figures)
        ratios.update(trace_ratios)
    write_bench_result(args.json, "scheduling_cost", figures, ratios,
                       "microseconds per scheduling decision, PudQueue vs rebuilding and re-sorting the queue; "
                       "the decision trace on over off")


if __name__ == "__main__":
    main()
