"""How slow a new vLLM engine's first iterations are, and whether the warm-up batch fixes it.

Runs the first `--jobs` jobs of `config/jobs/contended_fleet.yaml` (`timely`, plans written by
the model, robots simulated on the virtual clock) twice on one engine, and prints each run's
first iterations: when each started, how long it took and which generations it held. With
`--no-warm-batch` the engine skips its warm-up batch, as a cold engine: the first run's first
iterations then take over twice as long as the second's, for the same work.

Usage: . scripts/env.sh && python scripts/investigations/cold_engine.py [--no-warm-batch] [--jobs 10]"""

from __future__ import annotations

import argparse

from llm_planner.catalog.tokenizer import load_tokenizer
from llm_planner.domain.clock import VirtualClock
from llm_planner.engine.factory import make_vllm_engine
from llm_planner.lrtrace.compare import cut, resolve_workload
from llm_planner.lrtrace.simulate import simulate
from llm_planner.settings.config import load_planner_config


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-warm-batch", action="store_true", help="skip the new engine's warm-up batch")
    parser.add_argument("--jobs", type=int, default=10, help="the workload's first N jobs")
    parser.add_argument("--iterations", type=int, default=6, help="iterations printed per run")
    args = parser.parse_args()
    config = load_planner_config().model_copy(update={"engine": "vllm"})
    source = resolve_workload("config/jobs/contended_fleet.yaml", "config/traces/timely_tasks.yaml", config,
                              None, 1.0, None)
    workload = source.workload(0)
    workload = cut(workload, sorted(j.arrival_s for j in workload.jobs)[args.jobs - 1] + 1e-6)
    engine = make_vllm_engine(config, VirtualClock())
    engine.warm_batch_run = args.no_warm_batch  # True: as if it had run, so it is skipped
    log = []
    step = engine.step

    def timed_step():
        started, batch = engine.clock.now(), len(engine.running)
        result = step()
        log.append((started, engine.clock.now() - started, batch))
        return result

    engine.step = timed_step  # type: ignore[method-assign]  # timing each step is the point
    tokenizer = load_tokenizer(config.tokenizer)
    print(f"warm-up batch: {'skipped' if args.no_warm_batch else 'run'}; {len(workload.jobs)} jobs")
    for run in (1, 2):
        log.clear()
        simulate(workload, source.traces, "timely", config, 0, tokenizer, engine=engine)
        print(f"run {run}: " + "; ".join(f"{t:.3f} s: {d:.3f} s, batch {b}" for t, d, b in log[:args.iterations]))
        print(f"run {run}: {len(log)} iterations, {sum(d for _, d, _ in log):.2f} s in all")
    engine.close()


if __name__ == "__main__":
    main()
