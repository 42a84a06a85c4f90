"""How repeatable a quick engine profile's decode figures are, measured one size after
another (one pass of 6 steps a size) against in rounds (3 rounds of 4 steps, the median), side
by side on one engine: `--repeats` profiles of each, alternating which goes first. Prints, for
each way and each (batch, context), the figures of the repeats and their spread (largest over
smallest), and each profile's decode fit: its base step, its step for 8 sequences of 256
tokens, and its mean relative error.

    . scripts/env.sh && python scripts/investigations/profile_rounds.py --repeats 3 --json out/profile-rounds.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

WAYS = {"one pass": {"steps": 6, "rounds": 1}, "rounds": {"steps": 4, "rounds": 3}}
BATCHES, CONTEXTS = [1, 4, 8], [256, 1024]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--dtype", default="config", help="as `llm-planner check-engine --dtype`")
    parser.add_argument("--json", help="write the figures here")
    args = parser.parse_args()

    from llm_planner.commands.maintenance import start_profiling_engine
    from llm_planner.engine.cpu import cpu_info
    from llm_planner.engine.profiler import EngineProfiler, fit_decode

    engine = start_profiling_engine(argparse.Namespace(config=None, model=None), args.dtype)
    profiler = EngineProfiler(engine, log=lambda _: None)
    runs: dict[str, list[dict]] = {way: [] for way in WAYS}
    for repeat in range(args.repeats):
        for way in list(WAYS) if repeat % 2 == 0 else list(WAYS)[::-1]:
            rows = profiler.measure_decode(BATCHES, CONTEXTS, **WAYS[way])
            fit = fit_decode(rows)
            error = fit.mean_relative_error
            runs[way].append({"steps_ms": {f"B{b}/C{c}": round(s * 1000, 2) for b, c, s in rows},
                              "fit": {"base_ms": round(fit.base_s * 1000, 2),
                                      "B8/C256_ms": round(fit.step_s(8, 256) * 1000, 2),
                                      "mean_relative_error": round(error, 3)}})
            steps = ", ".join(f"{size} {ms:.1f}" for size, ms in runs[way][-1]["steps_ms"].items())
            print(f"repeat {repeat + 1}, {way}: {steps} ms; fit error {error * 100:.1f}%", flush=True)
    print(f"CPU: {cpu_info().describe()}; {engine.dtype}; {args.repeats} profiles each way")
    summary = {}
    for way, profiles in runs.items():
        spread = {size: max(p["steps_ms"][size] for p in profiles) / min(p["steps_ms"][size] for p in profiles)
                  for size in profiles[0]["steps_ms"]}
        summary[way] = {"profiles": profiles, "spread": {k: round(v, 3) for k, v in spread.items()},
                        "median_fit_error": statistics.median(p["fit"]["mean_relative_error"] for p in profiles)}
        print(f"{way} ({WAYS[way]['rounds']} round(s) of {WAYS[way]['steps']} steps a size):")
        for size, ratio in spread.items():
            figures = " ".join(f"{p['steps_ms'][size]:7.1f}" for p in profiles)
            print(f"  {size:9s} {figures} ms, spread {ratio:.2f}x")
        for key in ("base_ms", "B8/C256_ms", "mean_relative_error"):
            print(f"  fit {key:19s} " + " ".join(f"{p['fit'][key]:7.3g}" for p in profiles))
    if args.json:
        Path(args.json).write_text(json.dumps({"cpu": cpu_info().describe(), "dtype": engine.dtype, "ways": WAYS,
                                               "results": summary}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
