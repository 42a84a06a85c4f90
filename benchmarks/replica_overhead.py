"""What hosting an engine replica in a Ray actor costs per iteration, measured side by side in
one run on a local cluster (127.0.0.1):

1. the real engine (the bundled model on vLLM, one CPU thread): the same plans generated in
   this process and in a Ray actor, alternating rounds, unsegmented and with every generation
   suspended and resumed at each segment boundary (the messages a replica gets most). Both
   must give identical tokens; the figure is wall time per iteration.
2. the sim engine, which computes nothing: the bare cost of one iteration's call and answer.

Usage: python benchmarks/replica_overhead.py [--rounds 3] [--model DIR]"""

from __future__ import annotations

import argparse
import statistics
import time
from functools import partial

from llm_planner.domain.clock import VirtualClock, WallClock
from llm_planner.engine.base import GenerationRequest
from llm_planner.engine.factory import make_engine, make_vllm_engine
from llm_planner.engine.ray_replica import RayEngine, start_ray
from llm_planner.lrtrace.load import load_traces
from llm_planner.settings.config import load_planner_config
from llm_planner.settings.paths import data_path
from llm_planner.testing.bench_result import write_bench_result
from llm_planner.testing.engine_runs import run_plans, trace_plan_requests


def per_step_ms(engine, requests, segmented: bool) -> tuple[float, list[list[int]]]:
    before = engine.stats.steps
    runs, wall_s = run_plans(engine, requests, segmented)
    return 1000 * wall_s / (engine.stats.steps - before), [runs[r.gen_id].token_ids for r in requests]


def sim_iteration_us(engine, iterations: int) -> float:
    engine.reset(VirtualClock())
    engine.add(GenerationRequest("g", "p", "You plan.", "Scene: [door].", forced_output="tp();" * 400))
    started = time.perf_counter()
    for _ in range(iterations):
        engine.step()
    return 1e6 * (time.perf_counter() - started) / iterations


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--model")
    parser.add_argument("--max-tokens", type=int, default=96)
    parser.add_argument("--json", help="result file (default out/bench/replica_overhead.json)")
    args = parser.parse_args()
    config = load_planner_config().model_copy(update={"engine": "vllm"})
    start_ray()
    local = make_vllm_engine(config, WallClock(), args.model)
    remote = RayEngine(partial(make_engine, config, model=args.model), WallClock(), "replica", cpus=1)
    traces = load_traces(data_path("config", "traces", "timely_tasks.yaml")).traces
    requests = partial(trace_plan_requests, config, traces, max_tokens=args.max_tokens)

    print(f"1. the real engine ({local.dtype}), {len(traces)} plans in one batch, {args.rounds} rounds (alternating)")
    times: dict[str, list[float]] = {}
    identical = True
    for k in range(args.rounds):
        for segmented in (False, True):
            kind = "suspend+resume" if segmented else "unsegmented"
            for engine in (local, remote):
                run_plans(engine, requests(f"warm{k}{kind}"), False)  # the prompts' prefixes cached in both
            here_ms, here_ids = per_step_ms(local, requests(f"{kind}{k}"), segmented)
            ray_ms, ray_ids = per_step_ms(remote, requests(f"{kind}{k}"), segmented)
            identical &= here_ids == ray_ids
            times.setdefault(f"{kind}/in_process_ms", []).append(here_ms)
            times.setdefault(f"{kind}/ray_ms", []).append(ray_ms)
            print(f"   round {k} {kind:15s}: {here_ms:6.2f} ms per iteration in process, {ray_ms:6.2f} ms on Ray")
    figures = {key: round(statistics.median(ts), 3) for key, ts in times.items()}
    figures["token_identical"] = identical
    ratios = {}
    for kind in ("unsegmented", "suspend+resume"):
        ratio = figures[f"{kind}/ray_ms"] / figures[f"{kind}/in_process_ms"]
        ratios[f"vllm/{kind}_ray_over_in_process"] = round(ratio, 3)
        print(f"   median {kind}: {figures[f'{kind}/ray_ms']:.2f} ms on Ray vs {figures[f'{kind}/in_process_ms']:.2f} "
              f"ms in process -> {100 * (ratio - 1):+.1f}% per iteration")
    print(f"   token-identical in all rounds: {identical}")
    remote.close()

    print("2. the sim engine (no computation): one iteration's call and answer")
    sim_config = config.model_copy(update={"engine": "sim"})
    here = make_engine(sim_config, VirtualClock())
    there = RayEngine(partial(make_engine, sim_config), VirtualClock(), "sim replica", cpus=0)
    here_us, there_us = sim_iteration_us(here, 2000), sim_iteration_us(there, 2000)
    print(f"   {here_us:.0f} us in process, {there_us:.0f} us on Ray: {there_us - here_us:.0f} us per iteration")
    figures["sim/in_process_us"], figures["sim/ray_us"] = round(here_us, 1), round(there_us, 1)
    ratios["sim/ray_minus_in_process_us"] = round(there_us - here_us, 1)
    there.close()
    write_bench_result(args.json, "replica_overhead", figures, ratios,
                       "milliseconds per engine iteration (median of rounds); microseconds per sim iteration")


if __name__ == "__main__":
    main()
