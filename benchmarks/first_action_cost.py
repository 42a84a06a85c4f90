"""What each task's own plan grammar and retrieved examples cost an urgent task's first
action, on the real engine. Alerts with scenes the engine has not seen (so each task grammar
is compiled anew) are planned one at a time on the idle engine, rotating between three arms:
the skill set's grammar (compiled once), each task's grammar, and each task's grammar with
the K nearest corpus examples before the task (`vllm.retrieved_examples`). Every alert gets a
fresh scene in every arm. The figures are the time from adding the request to its first plan
token and to its first complete statement (what the planner can send), and the prompt tokens
it prefilled (those the prefix cache did not hold).

    python benchmarks/first_action_cost.py [--rounds 8] [--examples 3] [--skill-set S] [--json F]

The drone's alerts place a hazard ahead; an arm's (`--skill-set minispec_arm` or `python_arm`,
whose task grammars also follow the gripper) tell of an object that slipped from the gripper.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

THINGS = ["wall", "door", "person", "ladder", "lamp", "kite", "chair", "plant", "bench", "window", "box", "bicycle",
          "tree", "fence", "car", "dog", "shelf", "table", "statue", "sofa", "bottle", "cup", "helmet", "gate"]
ARMS = ("skill_set", "task", "task+examples")
ALERTS = {  # by whether the skill set flies: an alert naming the scene's first object
    True: "ALERT: a {0} is 30 cm ahead. Scene: [{1}]. Get clear of it.",
    False: "ALERT: the {0} slipped out of the gripper. Scene: [{1}]. Put it back on the {2}.",
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=8, help="alerts planned in each arm")
    parser.add_argument("--examples", type=int, default=3, help="retrieved examples in the third arm")
    parser.add_argument("--skill-set", default="minispec_drone", help="whose alerts (default minispec_drone)")
    parser.add_argument("--json", help="result file (default out/bench/first_action_cost.json)")
    args = parser.parse_args()

    from llm_planner.catalog.skills import load_skill_set
    from llm_planner.domain.clock import WallClock
    from llm_planner.engine.factory import make_vllm_engine
    from llm_planner.planning.prompts import plan_request, shared_request
    from llm_planner.planning.retrieval import examples_for
    from llm_planner.planning.segmenter import make_segmenter
    from llm_planner.settings.config import load_planner_config
    from llm_planner.testing.bench_result import write_bench_result

    config = load_planner_config()
    engine = make_vllm_engine(config, WallClock())
    skill_set = load_skill_set(args.skill_set)
    tuned = skill_set.name in engine.tuned_skill_sets
    engine.warm_up([shared_request(skill_set, tuned)])
    alert = ALERTS[any(s.moves == "up" for s in skill_set.spec.skills)]
    rng = random.Random(0)

    def first_action(gen_id: str, arm: str) -> tuple[float, float, int]:
        things = rng.sample(THINGS, 4)
        text = alert.format(things[0], ", ".join(things), things[1])
        k = args.examples if arm == "task+examples" else 0
        max_tokens = config.vllm.max_plan_tokens * skill_set.plan_token_scale
        request = plan_request(gen_id, skill_set, text, max_tokens=max_tokens, tuned=tuned,
                               task_grammar=arm != "skill_set",
                               examples=examples_for(skill_set.name, text, k, config.vllm.example_corpus))
        prompt_tokens = engine.prompt_tokens(request)
        segmenter = make_segmenter(skill_set)
        started = time.perf_counter()
        engine.add(request)
        first_token: float | None = None
        first_statement: float | None = None
        while engine.running:
            for out in engine.step().outputs:
                first_token = first_token or time.perf_counter() - started
                if first_statement is None and segmenter.feed(out.text):
                    first_statement = time.perf_counter() - started
                if out.finished:
                    engine.release(gen_id)
        if first_token is None:
            raise RuntimeError(f"{gen_id}: the engine wrote no token")
        return first_token, first_statement or time.perf_counter() - started, prompt_tokens

    times: dict[str, dict[str, list[float]]] = {arm: {"token": [], "statement": [], "prompt": []} for arm in ARMS}
    for arm in ARMS:  # grammars, kernels and the example index made once before timing
        first_action(f"warm-{arm}", arm)
    for k in range(args.rounds):
        for arm in ARMS[k % 3:] + ARMS[:k % 3]:
            token_s, statement_s, prompt_tokens = first_action(f"{arm}-{k}", arm)
            times[arm]["token"].append(token_s)
            times[arm]["statement"].append(statement_s)
            times[arm]["prompt"].append(prompt_tokens)
    engine.close()

    figures = {arm: {"first_token_ms_p50": round(1000 * statistics.median(t["token"]), 1),
                     "first_statement_ms_p50": round(1000 * statistics.median(t["statement"]), 1),
                     "prefill_tokens_p50": statistics.median(t["prompt"])}
               for arm, t in times.items()}
    ratios = {f"first_{what}/{arm}_over_{base}": round(statistics.median(times[arm][what])
                                                       / statistics.median(times[base][what]), 3)
              for arm, base in (("task", "skill_set"), ("task+examples", "task"))
              for what in ("token", "statement")}
    for arm, f in figures.items():
        print(f"{arm}: first token {f['first_token_ms_p50']:.1f} ms, first statement "
              f"{f['first_statement_ms_p50']:.1f} ms, {f['prefill_tokens_p50']:.0f} prefill tokens "
              f"(p50 of {args.rounds} alerts)")
    print(", ".join(f"{k} {v:.2f}x" for k, v in ratios.items()))
    write_bench_result(args.json, "first_action_cost", figures, ratios,
                       notes=f"{skill_set.name}: an alert with a fresh scene on the idle engine; each task grammar "
                             f"compiled anew; {args.examples} retrieved examples in the third arm")


if __name__ == "__main__":
    main()
