"""What the real engine's iterations cost against its profile, and what each alert waited for.

Runs `lrtrace compare` in-process on the real engine (virtual clock) with the decision trace
on. Prints the median decode-only iteration by batch size, measured against the profile,
then, per urgent task of each run, its decisions and the iterations from its arrival to its
first segment sent, as `start:duration ms/batch[/pf prefilled tokens][/n requests started]`.
E.g.

    . scripts/env.sh && python scripts/investigations/step_costs.py --config out/uncorrected.yaml \\
        --policies timely,vllm-stream --seeds 2 config/jobs/contended_fleet.yaml \\
        --traces config/traces/timely_tasks.yaml
"""

from __future__ import annotations

import argparse
import statistics
from collections import defaultdict


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workload")
    parser.add_argument("--traces", required=True)
    parser.add_argument("--config", default=None)
    parser.add_argument("--policies", default="timely,vllm-stream")
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--engine", choices=("vllm", "sim"), default="vllm")
    args = parser.parse_args()

    from llm_planner.domain.clock import VirtualClock
    from llm_planner.domain.decisions import Kind
    from llm_planner.engine.factory import make_watched_vllm_engine
    from llm_planner.lrtrace.compare import compare, resolve_workload, variants
    from llm_planner.settings.config import load_planner_config

    config = load_planner_config(args.config)
    source = resolve_workload(args.workload, args.traces, config)
    engine = make_watched_vllm_engine(config, VirtualClock(), None) if args.engine == "vllm" else None
    runs_of = variants(args.policies.split(","), config)
    result = compare(source, runs_of, config, args.seeds, engine, trace_decisions=True)

    decode_only = defaultdict(list)
    for _, trace in result.decision_runs():
        for i in trace.iterations:
            if i.prefill_tokens == 0 and i.started == 0 and i.members:
                decode_only[len(i.members)].append((i.duration_s, i.predicted_s))
    print(f"decode-only iterations (calibrate: {config.vllm.calibrate}), median ms measured / profile, by batch:")
    print("  " + "  ".join(f"b{b}: {1000 * statistics.median(m for m, _ in rows):.0f} / "
                           f"{1000 * statistics.median(p for _, p in rows):.0f} (n={len(rows)})"
                           for b, rows in sorted(decode_only.items())))
    for variant in runs_of:
        for seed, run in enumerate(result.runs[variant.label]):
            urgent = sorted((r for r in run.records if r.request.urgency_name == "urgent"),
                            key=lambda r: r.request.arrival_s)
            print(f"== {variant.label}, seed {seed}")
            assert run.trace is not None, "the runs are made with their decision trace"
            for record in urgent:
                task_id, arrived = record.request.task_id, record.request.arrival_s
                sent = record.segments[0].dispatched_s if record.segments else float("nan")
                window = [i for i in run.trace.iterations if arrived - 0.01 < i.t_s + i.duration_s and i.t_s < sent]
                waits = [d for d in run.trace.decisions if d.task_id == task_id and d.t_s <= sent
                         and d.kind in (Kind.DEFERRED, Kind.SUSPENDED)]
                text = record.segments[0].text if record.segments else ""
                print(f"  {task_id}: first segment {text!r} {sent - arrived:.3f} s after arrival, utility "
                      f"{record.utility:.2f} of {record.max_utility:.0f}; "
                      + "".join(f"{d.t_s - arrived:+.2f}:{d.kind.value} ({d.reason.value}); " for d in waits)
                      + " ".join(f"{i.t_s - arrived:+.2f}:{i.duration_s * 1000:.0f}/{len(i.members)}"
                                 + (f"/pf{i.prefill_tokens}" if i.prefill_tokens else "")
                                 + (f"/n{i.started}" if i.started else "") for i in window))


if __name__ == "__main__":
    main()
