"""What each task's own plan grammar costs an urgent task's first action, on the real engine:
alerts with scenes the engine has not seen (so each task grammar is compiled anew), planned
one at a time on the idle engine, alternating between each task's grammar and the skill set's
grammar (compiled once), each alert with a fresh scene in both arms. The figure is the time
from adding the request to its first plan token, and to its first complete statement (what
the planner can send).

    python benchmarks/task_grammar_cost.py [--rounds 8] [--json F]
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

THINGS = ["wall", "door", "person", "ladder", "lamp", "kite", "chair", "plant", "bench", "window", "box", "bicycle",
          "tree", "fence", "car", "dog", "shelf", "table", "statue", "sofa", "bottle", "cup", "helmet", "gate"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=8, help="alerts planned with each grammar")
    parser.add_argument("--json", help="result file (default out/bench/task_grammar_cost.json)")
    args = parser.parse_args()

    from llm_planner.catalog.skills import load_skill_set
    from llm_planner.domain.clock import WallClock
    from llm_planner.engine.factory import make_vllm_engine
    from llm_planner.planning.prompts import plan_request, shared_request
    from llm_planner.planning.segmenter import make_segmenter
    from llm_planner.settings.config import load_planner_config
    from llm_planner.testing.bench_result import write_bench_result

    config = load_planner_config()
    engine = make_vllm_engine(config, WallClock())
    drone = load_skill_set("minispec_drone")
    tuned = drone.name in engine.tuned_skill_sets
    engine.warm_up([shared_request(drone, tuned)])
    rng = random.Random(0)

    def first_action(gen_id: str, task_grammar: bool) -> tuple[float, float]:
        scene = ", ".join(rng.sample(THINGS, 4))
        text = f"ALERT: a {scene.split(', ')[0]} is 30 cm ahead. Scene: [{scene}]. Get clear of it."
        request = plan_request(gen_id, drone, text, max_tokens=config.vllm.max_plan_tokens, tuned=tuned,
                               task_grammar=task_grammar)
        segmenter = make_segmenter(drone)
        started = time.perf_counter()
        engine.add(request)
        first_token = first_statement = None
        while engine.running:
            for out in engine.step().outputs:
                first_token = first_token or time.perf_counter() - started
                if first_statement is None and segmenter.feed(out.text):
                    first_statement = time.perf_counter() - started
                if out.finished:
                    engine.release(gen_id)
        return first_token, first_statement or time.perf_counter() - started

    times: dict[str, dict[str, list[float]]] = {arm: {"token": [], "statement": []} for arm in ("task", "skill_set")}
    first_action("warm", True)  # the skill set's grammars and kernels compiled once before timing
    first_action("warm2", False)
    for k in range(args.rounds):
        for arm in (("task", "skill_set") if k % 2 == 0 else ("skill_set", "task")):
            token_s, statement_s = first_action(f"{arm}-{k}", arm == "task")
            times[arm]["token"].append(token_s)
            times[arm]["statement"].append(statement_s)
    engine.close()

    figures = {arm: {f"first_{what}_ms_p50": round(1000 * statistics.median(v), 1) for what, v in t.items()}
               for arm, t in times.items()}
    ratios = {f"first_{what}/task_over_skill_set": round(statistics.median(times["task"][what])
                                                         / statistics.median(times["skill_set"][what]), 3)
              for what in ("token", "statement")}
    for arm, f in figures.items():
        print(f"{arm} grammar: first token {f['first_token_ms_p50']:.1f} ms, first statement "
              f"{f['first_statement_ms_p50']:.1f} ms (p50 of {args.rounds} alerts)")
    print("task grammar / skill set grammar: " + ", ".join(f"{k} {v:.2f}x" for k, v in ratios.items()))
    write_bench_result(args.json, "task_grammar_cost", figures, ratios,
                       notes="an alert with a fresh scene on the idle engine; each task grammar compiled anew")


if __name__ == "__main__":
    main()
