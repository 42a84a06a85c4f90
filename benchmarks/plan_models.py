"""Is the default planner model at least as good as its base model on every evaluation set?
Both models write one plan per task of each set on the real engine (greedy, under each task's
plan grammar), in one run, and the table puts them side by side: valid, cut at the token
limit, repeated statements, does the task (all and per robot type) and, on error follow-ups,
alerts that act first. The default model must not be worse than the base on any of them. A
table per set then pairs the two models' plans task by task: the tasks only one of them does, and
how likely so uneven a split is by chance (sign test), to tell a real loss from a task or two of noise.
`--model` checks another model in the default's place, e.g. a candidate adapter against the
default (`--model out/adapter/model --base smollm2-135m-planner`). `--dtype float32` runs the
engine in another CPU class's dtype (greedy plans differ a little between dtypes).

    python benchmarks/plan_models.py [--sets instructions,final_check,blind_check,heldout] [--model M] [--base M]
        [--dtype D] [--json F]

Sets: `instructions`, `final_check` and `blind_check` (config/evaluation/, written apart from the
corpus; never tuned on; `blind_check` by a writer who saw only the skill sets) and `heldout`
(the held-out part of the narrow corpus beside the bundled adapter, config/tuning/adapter/corpus.jsonl;
no adapter was tuned on it).
"""

from __future__ import annotations

import argparse

SETS = {"instructions": ("config/evaluation/instructions.jsonl", None),
        "final_check": ("config/evaluation/final_check.jsonl", None),
        "blind_check": ("config/evaluation/blind_check.jsonl", None),
        "heldout": ("config/tuning/adapter/corpus.jsonl", "heldout")}
# figure -> higher is better
FIGURES = {"valid_rate": True, "truncated_rate": False, "repeated_statement_fraction": False, "task_rate": True,
           "first_action_rate": True}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", default=",".join(SETS), help=f"comma-separated, of {', '.join(SETS)}")
    parser.add_argument("--model", help="the model to check (default: the config's vllm.model)")
    parser.add_argument("--base", default="smollm2-135m-instruct", help="the model it must be at least as good as")
    parser.add_argument("--dtype", help="the engine's dtype (default: this CPU's, as the planner chooses)")
    parser.add_argument("--json", help="result file (default out/bench/plan_models.json)")
    args = parser.parse_args()

    from rich.console import Console
    from rich.table import Table

    from llm_planner.commands.plans import generate_on_engine, paired_table
    from llm_planner.lrtrace.plan_bench import paired, report
    from llm_planner.lrtrace.task_list import load_plan_tasks
    from llm_planner.settings.config import load_planner_config
    from llm_planner.testing.bench_result import write_bench_result

    config = load_planner_config()
    if args.dtype:
        config = config.with_engine_dtype(args.dtype)
    default = args.model or config.vllm.model
    names = [s.strip() for s in args.sets.split(",") if s.strip()]
    unknown = [s for s in names if s not in SETS]
    if unknown:
        raise SystemExit(f"unknown sets {unknown}: choose from {', '.join(SETS)}")
    figures: dict[str, dict] = {}
    pairs: dict[str, dict] = {}
    for name in names:
        path, split = SETS[name]
        tasks = [t for t in load_plan_tasks(path) if split is None or t.split == split]
        plans = {}
        for model in (default, args.base):
            result = report(generate_on_engine(config, "vllm", model, tasks)[0])
            plans[model] = result["plans"]
            figures[f"{name}/{model}"] = {
                **{key: result[key] for key in FIGURES}, "tasks": result["tasks"],
                **{f"task_rate/{robot}": summary["task_rate"] for robot, summary in result["robot_type"].items()}}
        pairs[name] = paired(plans[default], plans[args.base])
        figures[f"{name}/paired"] = pairs[name]

    table = Table(title=f"plans of {default} (checked) and {args.base} (base), greedy, task grammar")
    for column in ("set", "model", "tasks", "valid", "cut", "repeats", "does task", "per robot type",
                   "alerts act first"):
        table.add_column(column)
    worse = []
    for name in names:
        mine, base = figures[f"{name}/{default}"], figures[f"{name}/{args.base}"]
        for model, row in ((default, mine), (args.base, base)):
            robots = ", ".join(f"{k.split('/')[1]} {v:.0%}" for k, v in row.items() if k.startswith("task_rate/"))
            table.add_row(name, model, str(row["tasks"]), f"{row['valid_rate']:.0%}", f"{row['truncated_rate']:.0%}",
                          f"{row['repeated_statement_fraction']:.0%}", f"{row['task_rate']:.0%}", robots,
                          "-" if row["first_action_rate"] is None else f"{row['first_action_rate']:.0%}")
        robot_rates = {key: True for key in mine if key.startswith("task_rate/")}  # each robot type too
        for key, higher in {**FIGURES, **robot_rates}.items():
            a, b = mine.get(key), base.get(key)
            if a is not None and b is not None and (a < b if higher else a > b):
                worse.append(f"{name} {key}: {a:.3f} against {b:.3f}")
    console = Console(width=160)
    console.print(table)
    console.print(f"{default} is worse than {args.base} on: " + "; ".join(worse) if worse
                  else f"{default} is at least as good as {args.base} on every set, figure and robot type")
    for name in names:
        console.print(paired_table(pairs[name], default, args.base, subject=f"{name}: "))
    ratios = {f"{name}/task_rate default/base": round(figures[f"{name}/{default}"]["task_rate"]
                                                      / max(figures[f"{name}/{args.base}"]["task_rate"], 1e-9), 3)
              for name in names}
    write_bench_result(args.json, "plan_models", figures, ratios,
                       notes="does task: calls every required skill, names every required object and never "
                             "grasps with a full gripper; alerts act "
                             "first: error follow-ups opening with a plain call of a listed safe first skill")


if __name__ == "__main__":
    main()
