"""`llm-planner plans TASKS`: generate each distinct task's plan and say whether a robot can
run it (valid, truncated, calls, segments, repeated statements), as a table and JSON."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from llm_planner.catalog.skills import SkillSet, load_skill_set
from llm_planner.commands.consoles import stdout
from llm_planner.domain.clock import VirtualClock, WallClock
from llm_planner.engine.base import Engine
from llm_planner.engine.factory import make_sim_engine, make_vllm_engine
from llm_planner.lrtrace.plan_bench import PlanRun, format_p, generate_plans, paired, recheck, report
from llm_planner.lrtrace.task_list import PlanTask, load_plan_tasks
from llm_planner.planning.retrieval import examples_for
from llm_planner.settings.config import VllmConfig, load_planner_config

SIDE_BY_SIDE_ROWS = 20  # more tasks than this: the side-by-side table goes only to --markdown
_COLUMNS = [
    ("tasks", "tasks", "{:d}"),
    ("valid_rate", "valid", "{:.0%}"),
    ("truncated_rate", "cut", "{:.0%}"),
    ("calls_mean", "calls", "{:.1f}"),
    ("repeated_statement_fraction", "repeats", "{:.0%}"),
    ("tokens_mean", "tokens", "{:.1f}"),
    ("spearman_tokens_steps", "ρ tok/steps", "{:.2f}"),
    ("task_rate", "does task", "{:.0%}"),
    ("first_action_rate", "alerts act first", "{:.0%}"),
]


def add_parser(sub) -> None:
    p = sub.add_parser(
        "plans", help="plan benchmark: generate each task's plan and check that a robot can run it", description=__doc__
    )
    p.add_argument(
        "tasks",
        help="trace set, TimelyLLM workload/trace JSON, or JSON Lines of "
        "{robot_type, robot_system, task_input[, required_skills, required_objects]} "
        "(e.g. config/corpus/plan_tasks.jsonl); "
        "with --recheck, an earlier --json report",
    )
    p.add_argument(
        "--engine", choices=("sim", "vllm"), help="default: the config's engine (sim replays recorded plans)"
    )
    p.add_argument("--config", help="planner config (default: config/planner.yaml)")
    p.add_argument("--model", help="local HF model folder for --engine vllm (default: the config's vllm.model)")
    p.add_argument(
        "--unconstrained",
        action="store_true",
        help="--engine vllm without the plan grammar and repeat guard (to see what they do)",
    )
    p.add_argument(
        "--skill-set-grammar",
        action="store_true",
        help="--engine vllm with the skill set's plan grammar instead of each task's own (vllm.task_grammar "
        "off: any object name, any opening statement)",
    )
    p.add_argument(
        "--no-alert-hazards",
        action="store_true",
        help="--engine vllm: an alert's first action may move toward its hazard or an object "
        "(vllm.alert_hazards off; to see what the rule does)",
    )
    p.add_argument(
        "--examples",
        type=int,
        metavar="K",
        help="--engine vllm: show each task its K nearest tuning-corpus tasks with their plans "
        "(vllm.retrieved_examples; 0: none)",
    )
    p.add_argument("--split", help="only tasks of this split (e.g. tune, heldout)")
    p.add_argument("--limit", type=int, help="only the first N tasks")
    p.add_argument(
        "--recheck",
        action="store_true",
        help="TASKS is an earlier report: judge its plans again with today's checks (no engine); a report "
        "made with --against has both models' plans judged again and paired",
    )
    p.add_argument(
        "--against",
        metavar="MODEL",
        help="--engine vllm: also generate every plan with this model (e.g. smollm2-135m-instruct, the "
        "tuned model's base), show both plans of each task side by side, and count the tasks only one "
        "of them does (with a sign test)",
    )
    p.add_argument(
        "--compare",
        metavar="REPORT",
        help="with --recheck: also check this earlier report of the same tasks again and pair the two "
        "task by task, as --against does",
    )
    p.add_argument("--markdown", help="with --against: write the side-by-side table here")
    p.add_argument(
        "--json",
        help="write the report here (with --against or --compare, the other's under 'against' and the "
        "pairing under 'paired')",
    )
    p.set_defaults(func=cmd_plans)


def cmd_plans(args: argparse.Namespace) -> int:
    config = load_planner_config(args.config)
    if args.recheck:
        return _recheck(args, config)
    if args.compare:
        raise ValueError("--compare pairs two earlier reports: it needs --recheck (--against generates)")
    tasks = load_plan_tasks(args.tasks)
    if args.split:
        tasks = [t for t in tasks if t.split == args.split]
    if args.limit is not None:
        tasks = tasks[: args.limit]
    if not tasks:
        raise ValueError(f"{args.tasks}: no tasks{f' of split {args.split!r}' if args.split else ''}")
    engine_name = args.engine or config.engine
    if engine_name == "vllm":
        update: dict[str, bool] = {}
        if args.unconstrained:
            update["constrained"] = False
        elif args.skill_set_grammar:
            update["task_grammar"] = False
        if args.no_alert_hazards:
            update["alert_hazards"] = False
        config = config.model_copy(update={"vllm": config.vllm.model_copy(update=update)})
    if args.examples is not None:  # validated as the config file's value is
        vllm = VllmConfig.model_validate({**config.vllm.model_dump(), "retrieved_examples": args.examples})
        config = config.model_copy(update={"vllm": vllm})
    if args.against and engine_name != "vllm":
        raise ValueError("--against compares two models' plans: it needs --engine vllm")
    runs, max_tokens = generate_on_engine(config, engine_name, args.model, tasks)
    model = args.model or config.vllm.model
    result = {
        "engine": engine_name,
        "model": model if engine_name == "vllm" else None,
        "max_tokens": max_tokens if engine_name == "vllm" else None,
        "constrained": engine_name == "vllm" and config.vllm.constrained,
        "task_grammar": engine_name == "vllm" and config.vllm.constrained and config.vllm.task_grammar,
        "alert_hazards": engine_name == "vllm" and config.vllm.alert_hazards,
        "retrieved_examples": config.vllm.retrieved_examples,
        "task_file": str(args.tasks),
        **report(runs),
    }
    if args.against:
        other, _ = generate_on_engine(config, engine_name, args.against, tasks)
        _pair_with(
            result,
            {"model": args.against, **report(other)},
            model,
            args.against,
            f"{args.against}: the same {len(other)} tasks",
        )
        if len(tasks) <= SIDE_BY_SIDE_ROWS:
            stdout().print(side_by_side(tasks, {model: runs, args.against: other}))
        if args.markdown:
            Path(args.markdown).write_text(markdown_table(tasks, {model: runs, args.against: other}))
    _show(
        result,
        args.json,
        f"{len(runs)} plans from {args.tasks} on the {engine_name} engine"
        + (f" ({model})" if engine_name == "vllm" else ""),
    )
    return 0


def _plan_cell(run: PlanRun) -> tuple[str, str]:
    done = {True: "yes", False: "no", None: "-"}[None if run.task_check is None else run.task_check.does_task]
    return run.text.strip(), done


def side_by_side(tasks: list[PlanTask], runs: dict[str, list[PlanRun]]) -> Table:
    table = Table(title="the plans, model by model", show_lines=True)
    table.add_column("task")
    for model in runs:
        table.add_column(f"{model}")
        table.add_column("does task")
    for i, task in enumerate(tasks):
        # escaped: scene lists and Python lists are written in brackets, which rich reads as markup
        table.add_row(
            escape(task.task_input),
            *(escape(cell) for model_runs in runs.values() for cell in _plan_cell(model_runs[i])),
        )
    return table


def markdown_table(tasks: list[PlanTask], runs: dict[str, list[PlanRun]]) -> str:
    def cell(text: str) -> str:  # one table row per task, whatever the text holds
        return text.replace("\n", "⏎ ").replace("|", "\\|")

    lines = ["| task | " + " | ".join(f"{m} | does task" for m in runs) + " |", "|---|" + "---|---|" * len(runs)]
    for i, task in enumerate(tasks):
        cells = [cell(task.task_input)]
        for model_runs in runs.values():
            text, done = _plan_cell(model_runs[i])
            cells += [f"`{cell(text)}`", done]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def generate_on_engine(config, engine_name: str, model: str | None, tasks: list[PlanTask]) -> tuple[list[PlanRun], int]:
    """Every task's plan on the named engine (sim: the recorded plans, whole; vllm: the
    planner's token limit, times the skill set's scale), with progress; returns the runs and
    the token limit used."""
    skill_sets = _skill_sets(config, {t.robot_type for t in tasks})
    whole = 100_000  # no limit of the request's own: the engine's holds
    engine: Engine
    if engine_name == "vllm":
        engine, max_tokens = make_vllm_engine(config, WallClock(), model), config.vllm.max_plan_tokens
    else:
        engine, max_tokens = make_sim_engine(config, VirtualClock()), whole
    try:
        return _generate_with_progress(engine, tasks, skill_sets, whole, config.vllm), max_tokens
    finally:
        engine.close()


def _generate_with_progress(
    engine, tasks: list[PlanTask], skill_sets: dict[str, SkillSet], max_tokens: int, vllm: VllmConfig
) -> list[PlanRun]:
    console = Console(stderr=True)
    with Progress(
        TextColumn("[bold]plans"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=console
    ) as progress:
        bar = progress.add_task("plans", total=len(tasks))
        done = []

        def on_plan(_run) -> None:
            progress.advance(bar)
            done.append(1)
            if not console.is_terminal and len(done) % max(1, len(tasks) // 10) == 0:
                console.print(f"plans: {len(done)}/{len(tasks)}")  # a log has no live bar

        def examples(skill_set: str, task_text: str) -> tuple[tuple[str, str], ...]:
            return examples_for(skill_set, task_text, vllm.retrieved_examples, vllm.example_corpus)

        return generate_plans(
            engine,
            tasks,
            skill_sets,
            max_tokens,
            on_plan=on_plan,
            task_grammar=vllm.task_grammar,
            examples=examples,
            alert_hazards=vllm.alert_hazards,
        )


def _skill_sets(config, robot_types: set[str]) -> dict[str, SkillSet]:
    """Robot type -> its skill set."""
    return {name: load_skill_set(config.robot_type(name).skill_set) for name in robot_types}


def _recheck(args: argparse.Namespace, config) -> int:
    """Judge a saved report's plans again; its `against` model's too (a report of --against),
    or another report's (--compare), paired with them."""
    earlier = _read_report(args.tasks)
    result = _rechecked(earlier, args.tasks, args.split, config)
    other_report, other_name = None, ""
    if args.compare:
        other_report, other_name = _read_report(args.compare), Path(args.compare).stem
    elif isinstance(earlier.get("against"), dict) and "plans" in earlier["against"]:
        other_report = earlier["against"]
        other_name = str(other_report.get("model") or "against")
    if other_report is not None:
        other = _rechecked(other_report, args.compare or args.tasks, args.split, config)
        first_name = Path(args.tasks).stem if args.compare else str(result.get("model") or Path(args.tasks).stem)
        _pair_with(result, other, first_name, other_name, f"{other['tasks']} plans of {other_name}, checked again")
    _show(result, args.json, f"{result['tasks']} plans of {args.tasks}, checked again")
    return 0


def _pair_with(result: dict, other: dict, name: str, other_name: str, other_title: str) -> None:
    """Put the other model's report beside `result` (`against`), pair their plans task by task
    (`paired`), and show both."""
    result["against"] = other
    result["paired"] = paired(result["plans"], other["plans"])
    stdout().print(summary_table(other, other_title))
    stdout().print(paired_table(result["paired"], name, other_name))


def _read_report(path: str) -> dict:
    try:
        earlier = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise ValueError(f"{path}: not a report of `llm-planner plans --json` ({exc})") from None
    if not isinstance(earlier, dict) or not isinstance(earlier.get("plans"), list):
        raise ValueError(f"{path}: not a report of `llm-planner plans --json` (no list of plans)")
    return earlier


def _rechecked(earlier: dict, path: str, split: str | None, config) -> dict:
    plans = earlier["plans"]
    if split:
        plans = [p for p in plans if p.get("split") == split]
    runs = recheck(plans, _skill_sets(config, {p["robot_type"] for p in plans}))
    return {
        **{k: earlier.get(k) for k in ("engine", "model", "max_tokens", "constrained", "task_file")},
        "rechecked_from": str(path),
        **report(runs),
    }


def _show(result: dict, json_path: str | None, title: str) -> None:
    stdout().print(summary_table(result, title))
    if result["problems"]:
        stdout().print("why plans are not valid: " + ", ".join(f"{k} ({v})" for k, v in result["problems"].items()))
    if json_path:
        Path(json_path).parent.mkdir(parents=True, exist_ok=True)
        Path(json_path).write_text(json.dumps(result, indent=1) + "\n")
        stdout().print(f"wrote {json_path}")


def summary_table(result: dict, title: str) -> Table:
    table = Table(
        title=title,
        caption="valid: parses, calls an action, ends before the token limit, reads no unset "
        "variable, names only scene/task objects, never grasps with a full gripper; repeats: statements "
        "equal to an earlier one; ρ: Spearman of plan tokens vs the task's counted steps; does task: calls "
        "every required skill, names every required object (tasks that list them) and never grasps with a "
        "full gripper; alerts act first: error follow-ups whose plan opens with a plain call of a skill the "
        "task lists as safe first",
    )
    table.add_column("tasks of")
    for _, header, _ in _COLUMNS:
        table.add_column(header, justify="right")
    rows = (
        [("all", result)] + [(f"split {k}", v) for k, v in result["split"].items()] + list(result["robot_type"].items())
    )
    for name, summary in rows:
        cells = ("-" if summary.get(key) is None else fmt.format(summary[key]) for key, _, fmt in _COLUMNS)
        table.add_row(name, *cells)
    return table


def paired_table(pairing: dict, first: str, second: str, subject: str = "") -> Table:
    """`plan_bench.paired` as a table: per robot type, the tasks each model alone does
    (`subject`: what the tasks are, before the title)."""
    table = Table(
        title=f"{escape(subject)}tasks one model does and the other does not: {escape(first)} against {escape(second)}",
        caption="p: two-sided sign test on the tasks only one model does; a split as uneven as this one "
        "comes by chance with probability p when the two are equally good",
    )
    for header in ("tasks of", "both do", f"only {first}", f"only {second}", "neither", "p"):
        table.add_column(escape(header), justify="left" if header == "tasks of" else "right")
    for name, row in [("all", pairing)] + list(pairing["robot_type"].items()):
        table.add_row(
            name, *(str(row[k]) for k in ("both", "only_first", "only_second", "neither")), format_p(row["p"])
        )
    return table
