"""`lrtrace`: compose, import, simulate and compare robot LLM workloads."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from llm_planner.commands import lrtrace_args, lrtrace_explain, lrtrace_live, lrtrace_workloads
from llm_planner.commands.consoles import stdout
from llm_planner.commands.lrtrace_shared import (
    console,
    planner_config,
    progress_bar,
    vllm_engine,
    write_json,
)
from llm_planner.commands.quiet import route_library_output
from llm_planner.domain.decisions import write_decisions
from llm_planner.lrtrace import report
from llm_planner.lrtrace.compare import (
    ABLATIONS,
    compare,
    engine_stats_lines,
    generated_traces,
    parse_ablation,
    parse_counts,
    parse_levels,
    parse_placements,
    parse_policies,
    resolve_workload,
    variants,
)
from llm_planner.lrtrace.composer import list_presets, load_preset
from llm_planner.lrtrace.formats import FormatError, save
from llm_planner.sched.policies import POLICIES
from llm_planner.settings.model_file import ConfigError


def cmd_compare(args) -> int:
    config = planner_config(args)
    policies = parse_policies(args.policies)
    runs_of = variants(
        policies,
        config,
        parse_ablation(args.ablation),
        parse_counts(args.replicas),
        parse_placements(args.placement),
        args.again,
    )
    source = resolve_workload(
        args.workload, args.traces, config, args.duration, args.speed, parse_levels(args.levels, config)
    )
    if args.save_traces and config.engine != "vllm":
        raise ValueError("--save-traces writes the plans a model generated: give --engine vllm")
    engine = pool = view = None
    if args.live_view is not None or args.view_mcap:
        from llm_planner.view.live_view import LiveView

        view = LiveView(args.live_view, args.view_mcap)
        if view.url:
            console.print(f"live view: open {view.url} in Foxglove (Open connection, Foxglove WebSocket)")
    if config.engine == "vllm" and any(v.config.replicas == 1 for v in runs_of):
        from llm_planner.domain.clock import VirtualClock

        engine = vllm_engine(config, args, VirtualClock())
    if any(v.config.replicas > 1 for v in runs_of) and (config.engine == "vllm" or args.ray):
        from llm_planner.engine.factory import ReplicaPool

        console.print("engine replicas run as Ray actors")
        pool = ReplicaPool(config, args.model)
    try:
        with progress_bar(args.quiet) as progress:
            bar = progress.add_task(source.name, total=args.seeds * len(runs_of), status="")
            comparison = compare(
                source,
                runs_of,
                config,
                args.seeds,
                engine,
                tick=lambda label, seed, t, horizon: progress.update(
                    bar, status=f"seed {seed} {label}: {t:6.0f}/{horizon:.0f} s simulated"
                ),
                advance=lambda: progress.advance(bar),
                fail_rates=args.fail_rate,
                replica_pool=pool,
                trace_decisions=bool(args.decisions),
                live_view=view,
            )
    finally:
        if pool is not None:
            pool.close()
        if view is not None:
            view.close()
    results = comparison.results
    engine_name = (
        f"engine vllm ({engine.model_dir if engine is not None else args.model or config.vllm.model})"
        if config.engine == "vllm"
        else f"profile {config.engine_profile}"
    )
    out = stdout()
    report.print_tables(
        results, f"{source.name}: {args.seeds} seed(s), {engine_name}, max batch {config.batch.max_batch_size}", out
    )
    for label, (sim_s, wall_s, counts) in comparison.speed().items():
        out.print(
            f"{label:15s} simulated {sim_s:8.1f} s in {wall_s:6.2f} s wall "
            f"({sim_s / max(wall_s, 1e-9):7.0f} simulated s per wall s); tasks: {counts}"
        )
    for line in report.paired_lines(results):
        out.print(line)
    if args.fail_rate:
        for line in report.recovery_lines(results):
            out.print(line)
    if args.markdown:
        Path(args.markdown).write_text(report.markdown_tables(results))
    if config.engine == "vllm":
        for line in engine_stats_lines(comparison.runs):
            out.print(line)
    if engine is not None and args.check_sim:
        from llm_planner.lrtrace.sim_check import check_sim

        simulated = check_sim(comparison, runs_of, source, engine.profile_choice.path, out)
        results.update({f"{label} (sim)": levels for label, levels in simulated.items()})
    write_json(args.json, results, out)
    if args.decisions:
        write_decisions(comparison.decision_runs(), args.decisions)
        out.print(f"wrote the decision trace to {args.decisions} (read it with `lrtrace explain {args.decisions}`)")
    if args.save_traces:
        traces = generated_traces(comparison, source, str(args.model or config.vllm.model))
        save(traces, args.save_traces)
        out.print(f"wrote the {len(traces.traces)} generated plans to {args.save_traces}")
    if not args.no_plots:
        folder = Path(args.plots or Path("out") / source.name)
        folder.mkdir(parents=True, exist_ok=True)
        bars = report.plot_utility_by_task(comparison.by_label(), folder / "utility_by_task.png")
        first = {label: sims[0].records for label, sims in comparison.runs.items()}
        chosen = (
            args.timeline_tasks.split(",")
            if args.timeline_tasks
            else report.pick_timeline_tasks(first[runs_of[0].label])
        )
        timeline = report.plot_timeline(first, chosen, folder / "timeline.png")
        out.print(f"plots: {bars}, {timeline} (timeline: seed 0, tasks {', '.join(chosen)})")
    return 0


def cmd_simulate(args) -> int:
    args.policies = args.policy
    args.seeds = 1
    args.ablation = None
    args.again = False
    return cmd_compare(args)


def cmd_presets(args) -> int:
    for name in list_presets():
        p = load_preset(name)
        stdout().print(
            f"{name}: {p.description} (rate {p.rate_per_s}/s, up to {p.max_tasks_per_event} per event, "
            f"{p.agents} agents, {p.duration_s:.0f} s, traces {p.trace_ids})"
        )
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="lrtrace", description=__doc__)
    parser.add_argument("--config", help="planner config (default: config/planner.yaml)")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("compare", help="simulate one workload under several policies")
    lrtrace_args.sim_options(p)
    p.add_argument("--policies", default=",".join(POLICIES))
    p.add_argument(
        "--ablation",
        nargs="?",
        const=",".join(ABLATIONS),
        metavar="SWITCHES",
        help="also run timely with each of what it adds to the paper's algorithm switched off alone "
        f"({', '.join(ABLATIONS[:-1])}), and with the other segment-length estimate (predictor: "
        "none vs auto); a comma-separated list runs only those",
    )
    p.add_argument(
        "--again",
        action="store_true",
        help='also run timely a second time, unchanged ("timely again"): on a real engine its '
        "paired gap to timely is how far two runs of the same planner differ, the noise the "
        "other gaps are read against; zero in simulation",
    )
    p.add_argument(
        "--seeds",
        type=int,
        default=1,
        help="runs per policy; a preset is recomposed per seed, a file's jobs are kept "
        "and the seed draws the execution times not recorded in the jobs",
    )
    p.set_defaults(func=cmd_compare)

    p = sub.add_parser("simulate", help="simulate one workload under one policy")
    lrtrace_args.sim_options(p)
    p.add_argument("--policy", default="timely")
    p.set_defaults(func=cmd_simulate)

    lrtrace_workloads.add_parsers(sub)

    lrtrace_live.add_parsers(sub)

    lrtrace_explain.add_parser(sub)

    p = sub.add_parser("presets", help="list workload presets")
    p.set_defaults(func=cmd_presets)
    for p in sub.choices.values():
        p.add_argument(
            "--verbose",
            action="store_true",
            help="show the libraries' messages (vLLM, torch, ROS 2 logs) here instead of in out/lrtrace.log",
        )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if argv is None and not args.verbose:  # run as a command: keep its terminal for its own output
        log = route_library_output(Path("out") / "lrtrace.log", [console])
        console.print(f"[dim]library messages go to {log} (--verbose shows them here)[/dim]")
    try:
        return args.func(args)
    except (FormatError, ConfigError, ValueError, FileNotFoundError, RuntimeError) as exc:
        console.print(f"[red]lrtrace {args.command}: {exc}[/red]")
        return 2


if __name__ == "__main__":
    sys.exit(main())
