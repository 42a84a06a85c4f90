"""How often generated plans are valid (complete sentences of the skill set's grammar; Python
plans also parse with `ast`), with and without grammar-constrained decoding, on the bundled
model: one plan per bundled trace, greedy and sampled (temperature 0.8, several rounds; the engine seed makes runs repeatable).
Usage: python benchmarks/plan_validity.py [--rounds 4] [--model DIR]"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

from llm_planner.catalog.grammar import check_plan
from llm_planner.catalog.skills import load_skill_set
from llm_planner.domain.clock import WallClock
from llm_planner.engine.factory import make_vllm_engine
from llm_planner.lrtrace.load import load_traces
from llm_planner.settings.config import load_planner_config
from llm_planner.settings.paths import data_path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "test"))  # engine drivers shared with the tests

from engine_runs import plan_request, run_plans


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=4, help="sampled rounds (vLLM CPU has no per-request seeds)")
    parser.add_argument("--model")
    parser.add_argument("--max-tokens", type=int, default=160)
    args = parser.parse_args()
    config = load_planner_config()
    engine = make_vllm_engine(config, WallClock(), args.model)
    traces = load_traces(data_path("config", "traces", "timely_tasks.yaml")).traces
    settings = [("greedy", {"temperature": 0.0})] + [
        (f"T=0.8 round {k}", {"temperature": 0.8}) for k in range(args.rounds)]
    for constrained in (False, True):
        engine.constrained = constrained
        valid = total = truncated = 0
        reasons: Counter[str] = Counter()
        for label, sampling in settings:
            engine.sampling = sampling
            engine.reset()
            reqs = [plan_request(f"{label}-{t.trace_id}", config.robot_types[t.robot_type].skill_set, t.instruction,
                                 args.max_tokens, constrained) for t in traces]
            runs, _ = run_plans(engine, reqs, segmented=False)
            for req in reqs:
                run = runs[req.gen_id]
                problem = check_plan(load_skill_set(req.prefix_key), run.text)
                total += 1
                truncated += run.truncated
                if problem is None:
                    valid += 1
                else:
                    reasons["cut at the token limit" if run.truncated else problem] += 1
        mode = "constrained  " if constrained else "unconstrained"
        print(f"{mode}: {valid}/{total} plans valid ({100 * valid / total:.0f}%); {truncated} cut at "
              f"{args.max_tokens} tokens; invalid: {dict(reasons) or 'none'}")


if __name__ == "__main__":
    main()
