"""The real engine's overheads, measured side by side in one run on the bundled model:

1. segmentation overhead: the same plans (one per bundled trace, greedy, grammar-constrained)
   generated (a) unsegmented, (b) with the segmenter reading every token (what the planner
   does while a generation keeps running), (c) as (b) and every generation suspended (vLLM
   abort) at every segment boundary and resumed (re-added with prompt + generated ids) before
   the next step - the most suspensions a plan can have. All three must give identical tokens.
2. resume vs cold re-prefill of the same context (prefix cache hit vs emptied cache).

Usage: python benchmarks/engine_overhead.py [--rounds 3] [--model DIR]"""

from __future__ import annotations

import argparse
import statistics
from functools import partial

from llm_planner.domain.clock import WallClock
from llm_planner.engine.factory import make_vllm_engine
from llm_planner.engine.profiler import EngineProfiler
from llm_planner.lrtrace.load import load_traces
from llm_planner.settings.config import load_planner_config
from llm_planner.settings.paths import data_path
from llm_planner.testing.bench_result import write_bench_result
from llm_planner.testing.engine_runs import run_plans, trace_plan_requests


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--model")
    parser.add_argument("--max-tokens", type=int, default=96)
    parser.add_argument("--json", help="result file (default out/bench/engine_overhead.json)")
    args = parser.parse_args()
    config = load_planner_config()
    engine = make_vllm_engine(config, WallClock(), args.model)
    traces = load_traces(data_path("config", "traces", "timely_tasks.yaml")).traces
    requests = partial(trace_plan_requests, config, traces, max_tokens=args.max_tokens)

    print(f"1. segmentation overhead: {len(traces)} plans, all in one batch, {args.rounds} rounds (alternating)")
    times: dict[str, list[float]] = {"unsegmented": [], "segmenter only": [], "suspend+resume": []}
    identical = True
    for k in range(args.rounds):
        engine.reset()
        run_plans(engine, requests(f"w{k}"), segmented=False)  # warm the prefix cache of the prompts
        plain, t_plain = run_plans(engine, requests(f"p{k}"), segmented=False)
        detect, t_detect = run_plans(engine, requests(f"d{k}"), segmented=True, suspend=False)
        seg, t_seg = run_plans(engine, requests(f"s{k}"), segmented=True)
        for key, seconds in zip(times, (t_plain, t_detect, t_seg)):
            times[key].append(seconds)
        for trace in traces:
            reference = plain[f"p{k}-{trace.trace_id}"].token_ids
            identical &= (detect[f"d{k}-{trace.trace_id}"].token_ids == reference
                          == seg[f"s{k}-{trace.trace_id}"].token_ids)
        tokens = sum(len(r.token_ids) for r in plain.values())
        suspensions = sum(r.suspensions for r in seg.values())
        print(f"   round {k}: unsegmented {t_plain:.3f} s, segmenter only {t_detect:.3f} s, suspend+resume "
              f"{t_seg:.3f} s ({tokens} tokens, {suspensions} suspend/resume pairs)")
    base = statistics.median(times["unsegmented"])
    figures: dict[str, dict] = {"segmentation": {key: round(statistics.median(ts), 4) for key, ts in times.items()}
               | {"token_identical": identical, "suspensions_per_round": suspensions}, "resume": {}}
    ratios = {}
    for key in ("segmenter only", "suspend+resume"):
        t = statistics.median(times[key])
        ratios[f"segmentation/{key}_over_unsegmented"] = round(t / base, 3)
        print(f"   median {key}: {t:.3f} s vs {base:.3f} s unsegmented -> "
              f"{100 * (t - base) / base:+.1f}% of generation time"
              + (f" ({1000 * (t - base) / suspensions:.1f} ms per suspend/resume)" if key == "suspend+resume" else ""))
    print(f"   token-identical in all rounds: {identical}")

    print("2. resume with the prefix cache vs cold re-prefill of the same context:")
    profiler = EngineProfiler(engine, log=lambda line: None)
    for context in (512, 1024, 2048):
        hits, colds = profiler.measure_resume(context, 40, 3)
        hit, cold = statistics.median(hits), statistics.median(colds)
        print(f"   context {context + 40:5d} tokens: resume {hit * 1000:7.1f} ms, cold {cold * 1000:7.1f} ms, "
              f"ratio {cold / hit:5.1f}x")
        figures["resume"][f"{context + 40}_tokens"] = {"resume_ms": round(hit * 1000, 2),
                                                       "cold_ms": round(cold * 1000, 2)}
        ratios[f"resume/{context + 40}_tokens_cold_over_resume"] = round(cold / hit, 2)
    write_bench_result(args.json, "engine_overhead", figures, ratios,
                       "seconds per round of plans (median); milliseconds per resume against a cold re-prefill")


if __name__ == "__main__":
    main()
