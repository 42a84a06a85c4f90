"""Scheduling cost per decision: PudQueue (timely) vs the reference approach of rebuilding and
re-sorting the whole queue on every pick (NaiveRebuildQueue), measured side by side.

A decision = pick the best generation at the current time and take it out of the queue; the
taken entry is pushed back (as a resumed segment) so the queue keeps its size. Two kinds of
entries: G per skill set (the default, `predictor: none`), and G per task from the length
predictor (log-uniform 0.05-2 s, on the queue's grid, `predictor: auto`).

Then the decision trace's cost: a whole simulated workload (WID2, `timely`) with the trace
off, on, sent to a live view (a Foxglove server with no client), and to a live view writing
MCAP, runs interleaved. It prints the planner's batch decision (each iteration's admissions,
preemptions and shrinking) in microseconds, the whole run's wall time, each against off, and
the live view's own time per event sent and per snapshot.
Usage: python benchmarks/scheduling_cost.py [--sizes 1,8,100,1000] [--decisions 2000] [--trace-runs 5]
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from pathlib import Path

from llm_planner.domain.tuf import Tuf
from llm_planner.lrtrace.composer import compose_preset, load_preset, mean_exec_times, preset_traces
from llm_planner.lrtrace.simulate import simulate
from llm_planner.sched.queues import PudQueue, QueueEntry, bucket_gen_time
from llm_planner.settings.config import load_planner_config
from llm_planner.testing.bench_result import write_bench_result
from llm_planner.testing.naive_queue import NaiveRebuildQueue
from llm_planner.view.live_view import LiveView

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


MODES = ("off", "trace", "live view", "live view + MCAP")


def traced_run(workload, traces, config, mode: str, folder: Path) -> dict:
    """One simulated run with the trace off, on, or sent to a live view (a server with no
    client; and an MCAP file): microseconds per batch decision, the run's wall seconds, the
    events traced, and the live view's own time per event and per snapshot."""
    view = None
    if mode.startswith("live view"):
        view = LiveView(port=0, mcap=folder / "view.mcap" if "MCAP" in mode else None)
    t0 = time.perf_counter()
    result = simulate(workload, traces, "timely", config, 0, trace_decisions=mode == "trace", live_view=view)
    wall = time.perf_counter() - t0
    events = len(result.trace.decisions) + len(result.trace.iterations) if result.trace else 0
    run = {"decision_us": result.admission_us, "run_s": wall, "events": events}
    if view is not None:
        view.close()
        run.update(view_us_per_event=view.event_s / events * 1e6, view_ms_per_snapshot=view.snapshot_s /
                   view.snapshots * 1e3)
    return run


def trace_cost(runs: int) -> tuple[dict, dict]:
    config = load_planner_config()
    traces = preset_traces(load_preset("wid2"))
    workload = compose_preset(load_preset("wid2"), 0, traces, mean_exec_times(traces, config.robot_types))
    with tempfile.TemporaryDirectory() as folder:
        for mode in MODES:  # warm caches (tokenizer, grammar, skill sets, the server's runtime)
            traced_run(workload, traces, config, mode, Path(folder))
        measured: dict[str, list[dict]] = {mode: [] for mode in MODES}
        for _ in range(runs):
            for mode in MODES:
                measured[mode].append(traced_run(workload, traces, config, mode, Path(folder)))
    median = {mode: {key: statistics.median(r[key] for r in rows) for key in rows[0]}
              for mode, rows in measured.items()}
    off = median["off"]
    print(f"decision trace and live view, WID2 under timely ({median['trace']['events']:.0f} decisions and "
          f"iterations), median of {runs} runs each, interleaved; the live view snapshots every "
          "0.1 s of simulated time:")
    print(f"{'':>17} {'decision us':>12} {'x off':>6} {'run wall s':>11} {'x off':>6} {'view us/event':>14} "
          f"{'view ms/snapshot':>17}")
    figures, ratios = {"trace/events": median["trace"]["events"]}, {}
    for mode, m in median.items():
        view = (f"{m['view_us_per_event']:>14.1f} {m['view_ms_per_snapshot']:>17.2f}" if "view_us_per_event" in m
                else f"{'':>14} {'':>17}")
        print(f"{mode:>17} {m['decision_us']:>12.1f} {m['decision_us'] / off['decision_us']:>5.2f}x "
              f"{m['run_s']:>11.3f} {m['run_s'] / off['run_s']:>5.2f}x {view}")
        key = mode.replace(" + ", "_").replace(" ", "_")
        figures.update({f"trace/{key}/{name}": round(value, 3) for name, value in m.items() if name != "events"})
        if mode != "off":
            ratios[f"trace/{key}/decision_over_off"] = round(m["decision_us"] / off["decision_us"], 3)
            ratios[f"trace/{key}/run_over_off"] = round(m["run_s"] / off["run_s"], 3)
    return figures, ratios


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1,8,100,1000")
    parser.add_argument("--decisions", type=int, default=2000)
    parser.add_argument("--trace-runs", type=int, default=5,
                        help="runs of each: trace off, on, live view, live view + MCAP")
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
