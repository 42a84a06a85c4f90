"""`llm-planner predictor collect|train|eval`: the plan length predictor's data, training and
evaluation, on the configured engine."""

from __future__ import annotations

import json
from pathlib import Path

from rich.console import Console
from rich.table import Table

from llm_planner.commands.plans import generate_on_engine
from llm_planner.lrtrace.task_list import load_plan_tasks
from llm_planner.predictor.dataset import PlanSample, read_samples, write_samples
from llm_planner.predictor.evaluate import RESULT_KEYS, evaluate, train_predictor
from llm_planner.predictor.predict import LengthPredictor
from llm_planner.settings.config import load_planner_config
from llm_planner.settings.paths import data_path

CORPUS = data_path("config", "corpus", "plan_tasks.jsonl")


def default_checkpoint(model_name: str) -> Path:
    return data_path("config", "predictor", f"{model_name}.pt")


def add_parser(sub) -> None:
    p = sub.add_parser("predictor", help="plan length predictor: collect plans, train, evaluate")
    verbs = p.add_subparsers(dest="verb", required=True)
    c = verbs.add_parser("collect", help="generate the plans of a task file and record their lengths")
    c.add_argument("tasks", nargs="?", default=str(CORPUS), help="task file (default: the corpus)")
    c.add_argument("-o", "--output", default="out/predictor/plans.jsonl")
    _engine_args(c)
    c.set_defaults(func=cmd_collect)
    t = verbs.add_parser("train", help="train on collected plans (split != heldout) and save a checkpoint")
    t.add_argument("samples", nargs="?", default="out/predictor/plans.jsonl")
    t.add_argument("-o", "--output", help="checkpoint (default: config/predictor/<model>.pt)")
    t.add_argument("--epochs", type=int, default=600)
    t.add_argument("--config")
    t.set_defaults(func=cmd_train)
    e = verbs.add_parser("eval", help="generate each task's plan and score the predictor's predictions")
    e.add_argument("tasks", help="task file, or collected samples (.jsonl written by collect)")
    e.add_argument("--checkpoint", help="default: config/predictor/<model>.pt")
    e.add_argument("--split", help="only tasks of this split (e.g. heldout)")
    e.add_argument("--json")
    _engine_args(e)
    e.set_defaults(func=cmd_eval)


def _engine_args(p) -> None:
    p.add_argument("--engine", choices=("sim", "vllm"), help="default: the config's engine")
    p.add_argument("--config")
    p.add_argument("--model", help="local HF model folder for --engine vllm")


def _model_name(config, args) -> str:
    return Path(getattr(args, "model", None) or config.vllm.model).name


def collect(args, config, tasks) -> list[PlanSample]:
    runs, _ = generate_on_engine(config, args.engine or config.engine, args.model, tasks)
    return [
        PlanSample(
            r.task.task_id,
            r.task.split,
            r.task.robot_type,
            r.skill_set,
            r.task.task_input,
            r.tokens,
            len(r.segment_tokens),
            r.segment_tokens,
            r.check.valid,
        )
        for r in runs
    ]


def cmd_collect(args) -> int:
    config = load_planner_config(args.config)
    samples = collect(args, config, load_plan_tasks(args.tasks))
    write_samples(args.output, samples)
    print(f"wrote {args.output}: {len(samples)} plans")
    return 0


def cmd_train(args) -> int:
    config = load_planner_config(args.config)
    samples = read_samples(args.samples)
    training = [s for s in samples if s.split != "heldout"]
    predictor = train_predictor(training, _model_name(config, args), args.epochs)
    output = Path(args.output) if args.output else default_checkpoint(predictor.model.model_name)
    predictor.save(output)
    print(
        f"wrote {output} ({output.stat().st_size} bytes): trained on {len(training)} plans of "
        f"{predictor.model.model_name}, skill sets {predictor.model.skill_sets}"
    )
    held = [s for s in samples if s.split == "heldout"]
    if held:
        Console().print(result_table({"heldout": evaluate(predictor, held), "train": evaluate(predictor, training)}))
    return 0


def cmd_eval(args) -> int:
    config = load_planner_config(args.config)
    model_name = _model_name(config, args)
    checkpoint = Path(args.checkpoint) if args.checkpoint else default_checkpoint(model_name)
    if not checkpoint.is_file():
        raise FileNotFoundError(f"no predictor checkpoint {checkpoint}: `llm-planner predictor collect` then `train`")
    predictor = LengthPredictor.load(checkpoint)
    if predictor.model.model_name != model_name:
        Console(stderr=True).print(
            f"[yellow]warning: the checkpoint learned the plans of "
            f"{predictor.model.model_name}, the engine runs {model_name}: "
            "plan lengths depend on the model"
        )
    if args.tasks.endswith(".jsonl") and _is_samples(args.tasks):
        samples = read_samples(args.tasks)
    else:
        tasks = load_plan_tasks(args.tasks)
        samples = collect(args, config, [t for t in tasks if not args.split or t.split == args.split])
    if args.split:
        samples = [s for s in samples if s.split == args.split]
    unknown = sorted({s.skill_set for s in samples} - set(predictor.model.skill_sets))
    if unknown:
        Console(stderr=True).print(f"[yellow]warning: the checkpoint has not seen skill sets {unknown}")
    result = evaluate(predictor, samples)
    Console().print(result_table({args.split or "tasks": result}))
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(result, indent=1) + "\n")
        print(f"wrote {args.json}")
    return 0


def _is_samples(path: str) -> bool:
    first = next((line for line in Path(path).read_text().splitlines() if line.strip()), "{}")
    return "segment_tokens" in json.loads(first)


def result_table(results: dict[str, dict]) -> Table:
    table = Table(title="plan length predictor")
    table.add_column("tasks of")
    for key in RESULT_KEYS + ("interval90_coverage",):
        table.add_column(key.replace("_", " "), justify="right")
    for name, result in results.items():
        table.add_row(
            name,
            *(
                f"{result[k]:.2f}" if isinstance(result[k], float) else str(result[k])
                for k in RESULT_KEYS + ("interval90_coverage",)
            ),
        )
    return table
