"""`lrtrace compose` and `lrtrace import`: make a workload, or convert the TimelyLLM
artifact's files to LRTrace."""

from __future__ import annotations

from pathlib import Path

from llm_planner.commands.consoles import stdout
from llm_planner.commands.lrtrace_shared import planner_config
from llm_planner.lrtrace.composer import compose_preset, list_presets, load_preset, mean_exec_times, preset_traces
from llm_planner.lrtrace.formats import FormatError, save
from llm_planner.lrtrace.load import load_traces, load_workload


def add_parsers(sub) -> None:
    p = sub.add_parser("compose", help="compose a workload (a preset or your own parameters)")
    p.add_argument("--preset", help=f"one of: {', '.join(list_presets())}; the options below override its values")
    p.add_argument("--traces")
    p.add_argument("--trace-ids", help="comma-separated")
    p.add_argument("--rate", type=float, help="events per second (Poisson)")
    p.add_argument("--max-tpe", type=int, help="max tasks per event")
    p.add_argument("--agents", type=int)
    p.add_argument("--duration", type=float, help="seconds")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("-o", "--output", required=True, help=".yaml or .json")
    p.set_defaults(func=cmd_compose)

    p = sub.add_parser("import", help="convert a TimelyLLM artifact workload or trace set to LRTrace")
    p.add_argument("file")
    p.add_argument("-o", "--output", required=True)
    p.add_argument("--texts", help="for a workload: also write its task texts as a trace set")
    p.set_defaults(func=cmd_import)


def cmd_compose(args) -> int:
    config = planner_config(args)
    if args.preset:
        # the options given override the preset's own values
        overrides = {
            field: value
            for field, value in (
                ("trace_ids", [int(x) for x in args.trace_ids.split(",")] if args.trace_ids else None),
                ("rate_per_s", args.rate),
                ("max_tasks_per_event", args.max_tpe),
                ("agents", args.agents),
                ("duration_s", args.duration),
            )
            if value is not None
        }
        preset = load_preset(args.preset)
        preset = preset.model_validate({**preset.model_dump(), **overrides})
        traces = load_traces(args.traces) if args.traces else preset_traces(preset)
        workload = compose_preset(preset, args.seed, traces, mean_exec_times(traces, config.robot_types))
    else:
        from llm_planner.lrtrace.composer import compose

        if not (args.traces and args.trace_ids and args.rate and args.max_tpe and args.agents and args.duration):
            raise ValueError("without a preset, give --traces, --trace-ids, --rate, --max-tpe, --agents and --duration")
        traces = load_traces(args.traces)
        ids = [int(x) for x in args.trace_ids.split(",")]
        workload = compose(
            traces,
            ids,
            args.rate,
            args.max_tpe,
            args.agents,
            args.duration,
            args.seed,
            exec_mean_s=mean_exec_times(traces, config.robot_types),
            name=Path(args.output).stem,
        )
    save(workload, args.output)
    stdout().print(
        f"wrote {args.output}: {len(workload.jobs)} jobs over {workload.duration_s:.0f} s, {workload.agents} agents"
    )
    return 0


def cmd_import(args) -> int:
    raw_path = Path(args.file)
    try:
        traces = load_traces(raw_path)
        save(traces, args.output)
        stdout().print(f"wrote {args.output}: trace set with {len(traces.traces)} traces")
        return 0
    except FormatError:
        pass
    workload, texts = load_workload(raw_path)
    if args.texts and texts is None:
        raise FormatError(f"{raw_path}: --texts: only a TimelyLLM artifact job list carries task texts")
    save(workload, args.output)
    stdout().print(f"wrote {args.output}: workload with {len(workload.jobs)} jobs")
    if args.texts and texts is not None:
        save(texts, args.texts)
        stdout().print(f"wrote {args.texts}: task texts of {len(texts.traces)} traces (no plans)")
    return 0
