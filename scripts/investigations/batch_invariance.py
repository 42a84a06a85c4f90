"""Does a plan depend on the company it is generated in? Greedy decoding is deterministic for a
fixed computation, but a CPU kernel may sum in another order at another batch shape. This
script generates one plan per task of a trace set (default: the bundled one, whose drone tasks
make up the WID2 workloads) with the real engine in three ways and counts the plans whose
tokens differ from the plan generated alone:

- alone: one request at a time (the reference);
- together: all requests in one batch, each task `--copies` times (44 requests with the 11
  bundled tasks and 4 copies; a saturated run's batches hold up to 32);
- segmented: the same batch, each suspended and resumed at every segment boundary (as the
  planner does; a resumed request recomputes its last partial KV block by prefill).

Each variant runs in its own process (vLLM keeps process-wide state): the engine's dtypes, and
with `no-amx` bfloat16 with vLLM's AMX kernels off (its CPU attention and small-GEMM kernels
are chosen by `torch.cpu._is_amx_tile_supported()`, private in torch 2.13 and vLLM 0.32;
answering False makes it take the AVX-512 kernels a CPU with bf16 but no AMX gets). Wall times
per way are printed beside the counts, so the price of a variant is measured in the same run.

    python scripts/investigations/batch_invariance.py --model smollm2-135m-instruct
    python scripts/investigations/batch_invariance.py --variants bfloat16,bfloat16-no-amx --json out/x.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

VARIANTS = ("bfloat16", "bfloat16-no-amx", "float32")


def _run_one(variant: str, model: str | None, traces_name: str | None, max_tokens: int, copies: int) -> dict:
    if variant.endswith("-no-amx"):
        import torch

        torch.cpu._is_amx_tile_supported = lambda: False
    from llm_planner.domain.clock import VirtualClock
    from llm_planner.engine.factory import make_vllm_engine
    from llm_planner.lrtrace.load import load_traces
    from llm_planner.settings.config import load_planner_config
    from llm_planner.settings.paths import data_path
    from llm_planner.testing.engine_runs import run_plans, trace_plan_requests

    dtype = variant.removesuffix("-no-amx")
    config = load_planner_config().with_engine_dtype(dtype)
    engine = make_vllm_engine(config, VirtualClock(), model)
    traces = load_traces(traces_name or data_path("config", "traces", "timely_tasks.yaml")).traces

    def requests(batch_id):
        return trace_plan_requests(config, traces, batch_id, max_tokens)

    engine.reset()
    run_plans(engine, requests("warm"), segmented=False)  # the prompts' prefix cache, as in a run
    alone, wall_alone = {}, 0.0
    for request in requests("a"):
        runs, wall = run_plans(engine, [request], segmented=False)
        alone.update(runs)
        wall_alone += wall
    def copies_of(prefix):
        return [r for c in range(copies) for r in requests(f"{prefix}{c}")]

    together, wall_together = run_plans(engine, copies_of("t"), segmented=False)
    segmented, wall_segmented = run_plans(engine, copies_of("s"), segmented=True)
    result = {"variant": variant, "plans": len(traces), "copies": copies, "wall_s": {
        "alone": round(wall_alone, 3), "together": round(wall_together, 3), "segmented": round(wall_segmented, 3)}}
    for way, runs in (("together", together), ("segmented", segmented)):
        result[f"{way}_differing"] = [
            f"{t.trace_id}#{c}" for c in range(copies) for t in traces
            if runs[f"{way[0]}{c}-{t.trace_id}"].token_ids != alone[f"a-{t.trace_id}"].token_ids]
    result["tokens"] = sum(len(r.token_ids) for r in alone.values())
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--variants", default=",".join(VARIANTS), help=f"comma-separated, of: {', '.join(VARIANTS)}")
    parser.add_argument("--model", help="the engine's model (default: the configured one)")
    parser.add_argument("--traces", help="trace set (default: config/traces/timely_tasks.yaml)")
    parser.add_argument("--max-tokens", type=int, default=96)
    parser.add_argument("--copies", type=int, default=4, help="copies of each task in the batch (default 4)")
    parser.add_argument("--json", help="write the figures here")
    parser.add_argument("--one", help=argparse.SUPPRESS)  # a child process's single variant
    args = parser.parse_args()
    if args.one:
        result = _run_one(args.one, args.model, args.traces, args.max_tokens, args.copies)
        Path(args.json).write_text(json.dumps(result))
        return 0
    from llm_planner.testing.engine_runs import run_in_child

    variants = args.variants.split(",")
    for variant in variants:
        if variant not in VARIANTS:
            parser.error(f"unknown variant {variant!r}")
    extra = [opt for name, value in (("--model", args.model), ("--traces", args.traces)) if value
             for opt in (name, value)]
    results = []
    for variant in variants:
        r = run_in_child(__file__, "--one", variant, "--max-tokens", str(args.max_tokens), "--copies", str(args.copies),
                         *extra)
        results.append(r)
        wall = r["wall_s"]
        print(f"{variant:16s} {r['plans']} plans, {r['tokens']} tokens alone; of {r['plans'] * r['copies']} in one "
              f"batch, differ from alone: together {len(r['together_differing'])}, segmented "
              f"{len(r['segmented_differing'])}; wall s alone {wall['alone']:.2f}, together {wall['together']:.2f}, "
              f"segmented {wall['segmented']:.2f}", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
