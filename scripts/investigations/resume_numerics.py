"""Why a resumed generation can differ from an uninterrupted one: prefill vs decode numerics.

A resumed generation is a new vLLM request whose prompt ends with the plan so far; vLLM's
prefix cache serves the full KV blocks, and the last partial block is recomputed by prefill,
where the uninterrupted run computed the same positions one decode step at a time. This
script generates the test plans of test/test_vllm_engine.py both ways in one dtype (one
process per dtype: vLLM keeps process-wide state) and reports, per generation:
- where the two outputs first differ, and the greedy margin there (top-1 minus top-2
  log-probability after the grammar mask, in the uninterrupted run) in nats;
- the largest difference of the chosen token's log-probability between the two runs at the
  positions where they still agree (the size of the prefill-vs-decode noise);
- the smallest greedy margin anywhere in the uninterrupted run (how close the run came to a tie).

    python scripts/investigations/resume_numerics.py                 # bfloat16 and float32, one process each
    python scripts/investigations/resume_numerics.py --dtype float32 --json out/numerics-float32.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def _run_one(dtype: str, max_tokens: int) -> dict:
    from llm_planner.domain.clock import VirtualClock
    from llm_planner.engine.factory import make_vllm_engine
    from llm_planner.settings.config import load_planner_config
    from llm_planner.testing.engine_runs import ENGINE_TASKS as TASKS
    from llm_planner.testing.engine_runs import plan_request, run_plans

    config = load_planner_config()
    vllm_cfg = config.vllm.model_copy(update={
        "engine_args": {**config.vllm.engine_args, "dtype": dtype, "logprobs_mode": "processed_logprobs"},
        "sampling": {**config.vllm.sampling, "logprobs": 2},
    })
    engine = make_vllm_engine(config.model_copy(update={"vllm": vllm_cfg}), VirtualClock())
    captured: dict[str, list] = {}
    step = engine.llm.step

    def recording_step():
        outs = step()
        for ro in outs:
            gen_id = ro.request_id.split("#")[0]
            captured.setdefault(gen_id, []).extend(ro.outputs[0].logprobs or [])
        return outs

    engine.llm.step = recording_step  # type: ignore[method-assign]  # recording is the point
    requests = [plan_request(f"g{i}", ss, task, max_tokens=max_tokens) for i, (ss, task) in enumerate(TASKS)]
    result = {}
    runs: dict[str, dict] = {}
    for mode in ("plain", "segmented"):
        engine.reset()
        captured.clear()
        runs[mode] = run_plans(engine, requests, segmented=mode == "segmented")[0]
        runs[mode + "_logprobs"] = {g: list(v) for g, v in captured.items()}
    for gen_id, plain in runs["plain"].items():
        seg = runs["segmented"][gen_id]
        lp_plain, lp_seg = runs["plain_logprobs"][gen_id], runs["segmented_logprobs"][gen_id]
        margins = [_margin(p) for p in lp_plain]
        first = next((i for i, (a, b) in enumerate(zip(plain.token_ids, seg.token_ids)) if a != b), None)
        agree = range(first if first is not None else min(len(plain.token_ids), len(seg.token_ids)))
        noise = max((abs(lp_plain[i][plain.token_ids[i]].logprob - lp_seg[i][seg.token_ids[i]].logprob)
                     for i in agree), default=0.0)
        entry = {"tokens": len(plain.token_ids), "suspensions": seg.suspensions, "first_difference": first,
                 "min_margin_nats": min(margins), "max_chosen_logprob_noise_nats": noise}
        if first is not None:
            tok = engine.tokenizer
            entry.update({
                "margin_at_difference_nats": margins[first],
                "plain_token": [plain.token_ids[first], tok.decode([plain.token_ids[first]])],
                "segmented_token": [seg.token_ids[first], tok.decode([seg.token_ids[first]])],
            })
        result[gen_id] = entry
    return {"dtype": dtype, "block_size": engine.block_size, "generations": result}


def _margin(position_logprobs: dict) -> float:
    values = sorted((lp.logprob for lp in position_logprobs.values()), reverse=True)
    return values[0] - values[1] if len(values) > 1 else float("inf")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dtype", choices=["bfloat16", "float32"], help="one dtype in this process (default: both)")
    parser.add_argument("--max-tokens", type=int, default=48)
    parser.add_argument("--json", help="write the figures here")
    parser.add_argument("--quiet", action="store_true", help="no table")
    args = parser.parse_args()
    if args.dtype:
        result = [_run_one(args.dtype, args.max_tokens)]
    else:
        from llm_planner.testing.engine_runs import run_in_child

        result = [run for dtype in ("bfloat16", "float32")
                  for run in run_in_child(__file__, "--dtype", dtype, "--max-tokens", str(args.max_tokens), "--quiet")]
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
    if not args.quiet:
        for run in result:
            print(f"{run['dtype']} (KV block {run['block_size']} tokens):")
            for gen_id, g in run["generations"].items():
                diff = ("identical" if g["first_difference"] is None else
                        f"differs at {g['first_difference']} ({g['plain_token'][1]!r} vs {g['segmented_token'][1]!r}, "
                        f"margin there {g['margin_at_difference_nats']:.4f})")
                print(f"  {gen_id}: {g['tokens']} tokens, {g['suspensions']} resumes, {diff}; "
                      f"min margin {g['min_margin_nats']:.4f}, "
                      f"noise where equal {g['max_chosen_logprob_noise_nats']:.2e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
