"""What the `lrtrace` commands share: the progress console and bar, the planner config with
the command line's overrides, the shared real engine, the JSON output."""

from __future__ import annotations

import json
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from llm_planner.settings.config import load_planner_config

console = Console(stderr=True)


def progress_bar(quiet: bool) -> Progress:
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[status]}"),
        TimeElapsedColumn(),
        console=console,
        disable=quiet,
    )


def planner_config(args):
    config = load_planner_config(args.config)
    if getattr(args, "engine", None):
        config = config.model_copy(update={"engine": args.engine})
    if getattr(args, "dtype", None):
        if config.engine != "vllm":
            raise ValueError(f"--dtype {args.dtype} is the real engine's: give --engine vllm")
        config = config.with_engine_dtype(args.dtype)
    if getattr(args, "max_batch", None):
        config = config.model_copy(update={"batch": config.batch.model_copy(update={"max_batch_size": args.max_batch})})
    return config


def vllm_engine(config, args, clock):
    """The real engine that every run of the command shares."""
    from llm_planner.engine.cpu import cpu_info
    from llm_planner.engine.factory import make_watched_vllm_engine

    console.print(f"starting vLLM with {args.model or config.vllm.model} ...")
    engine = make_watched_vllm_engine(config, clock, args.model)
    console.print(f"engine: {engine.dtype} on {cpu_info().describe()}, profile {engine.profile_choice.describe()}")
    return engine


def write_json(path: str | None, results: dict, out) -> None:
    if path:
        Path(path).write_text(json.dumps(results, indent=2))
        out.print(f"wrote {path}")
