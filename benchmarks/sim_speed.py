"""Simulation speed: simulated seconds per wall-clock second for a preset workload.
Usage: python benchmarks/sim_speed.py [--workload wid3] [--policy timely] [--seed 0] [--json F]"""

from __future__ import annotations

import argparse

from llm_planner.catalog.tokenizer import load_tokenizer
from llm_planner.lrtrace.composer import compose_preset, load_preset, mean_exec_times, preset_traces
from llm_planner.lrtrace.simulate import simulate
from llm_planner.settings.config import load_planner_config
from llm_planner.testing.bench_result import write_bench_result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", default="wid3")
    parser.add_argument("--policy", default="timely")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", help="result file (default out/bench/sim_speed.json)")
    args = parser.parse_args()
    config = load_planner_config()
    preset = load_preset(args.workload)
    traces = preset_traces(preset)
    workload = compose_preset(preset, args.seed, traces, mean_exec_times(traces, config.robot_types))
    tokenizer = load_tokenizer(config.tokenizer)
    simulate(workload, traces, args.policy, config, args.seed, tokenizer)  # warm caches
    result = simulate(workload, traces, args.policy, config, args.seed, tokenizer)
    print(f"{args.workload} ({len(workload.jobs)} tasks, {preset.duration_s:.0f} s workload), policy {args.policy}: "
          f"simulated {result.simulated_s:.1f} s in {result.wall_s:.2f} s wall = "
          f"{result.simulated_s / result.wall_s:.0f} simulated s per wall s; "
          f"{result.engine_stats.steps} engine steps, {result.engine_stats.generated_tokens} tokens")
    write_bench_result(args.json, "sim_speed", {
        "workload": args.workload, "policy": args.policy, "tasks": len(workload.jobs),
        "simulated_s": round(result.simulated_s, 2), "wall_s": round(result.wall_s, 3),
        "simulated_s_per_wall_s": round(result.simulated_s / result.wall_s, 1),
        "engine_steps": result.engine_stats.steps, "generated_tokens": result.engine_stats.generated_tokens})


if __name__ == "__main__":
    main()
