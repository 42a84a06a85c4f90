"""Which dtype is faster for the engine on this CPU: the same quick measurement as
`llm-planner check-engine` (cold 256-token prefill, decode steps at batch 1 and 8 with
256-token contexts) in bfloat16 and in float32, one process each (vLLM keeps process-wide
state). The engine's default dtype (llm_planner/engine/cpu.py) should be the faster one.

    python benchmarks/dtype_speed.py [--json F]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

DTYPES = ("bfloat16", "float32")


def _measure(dtype: str) -> dict:
    from llm_planner.domain.clock import WallClock
    from llm_planner.engine.factory import make_vllm_engine
    from llm_planner.engine.profiler import EngineProfiler
    from llm_planner.settings.config import load_planner_config

    config = load_planner_config().with_engine_dtype(dtype)
    vllm_cfg = config.vllm.model_copy(update={"constrained": False})
    engine = make_vllm_engine(config.model_copy(update={"vllm": vllm_cfg}), WallClock())
    profiler = EngineProfiler(engine, log=lambda _: None)
    (_, prefill_s), = profiler.measure_prefill([256], 2)
    steps = {batch: s for batch, _, s in profiler.measure_decode([1, 8], [256], 6)}
    return {"dtype": dtype, "prefill_ms_per_token": prefill_s / 256 * 1000,
            "decode_b1_ms": steps[1] * 1000, "decode_b8_ms": steps[8] * 1000}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dtype", choices=DTYPES, help=argparse.SUPPRESS)  # one child process
    parser.add_argument("--json", help="result file (default out/bench/dtype_speed.json)")
    args = parser.parse_args()
    if args.dtype:
        Path(args.json).write_text(json.dumps(_measure(args.dtype)))
        return 0
    from llm_planner.engine.cpu import cpu_info
    from llm_planner.testing.bench_result import write_bench_result
    from llm_planner.testing.engine_runs import run_in_child

    rows = [run_in_child(__file__, "--dtype", dtype) for dtype in DTYPES]
    info = cpu_info()
    print(f"CPU: {info.describe()}; default dtype here: {info.best_dtype}")
    print(f"  {'dtype':9s} {'prefill/token':>14s} {'decode B1':>10s} {'decode B8':>10s}")
    for r in rows:
        print(f"  {r['dtype']:9s} {r['prefill_ms_per_token']:11.2f} ms {r['decode_b1_ms']:7.1f} ms "
              f"{r['decode_b8_ms']:7.1f} ms")
    ratios = {}
    for key, label in (("prefill_ms_per_token", "prefill"), ("decode_b1_ms", "decode batch 1"),
                       ("decode_b8_ms", "decode batch 8")):
        best, other = sorted(rows, key=lambda r: r[key])
        print(f"{label}: {best['dtype']} {other[key] / best[key]:.1f}x faster")
        ratios[f"{key}/{other['dtype']}_over_{best['dtype']}"] = round(other[key] / best[key], 2)
    write_bench_result(args.json, "dtype_speed", {"default_dtype": info.best_dtype, "rows": rows}, ratios,
                       "milliseconds: cold prefill per token, decode steps at batch 1 and 8 (256-token contexts)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
