"""`lrtrace`: compose, import, simulate and compare robot LLM workloads."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from llm_planner.catalog.faults import parse_fail_rates
from llm_planner.commands import lrtrace_explain, lrtrace_workloads
from llm_planner.commands.lrtrace_live import cmd_record, cmd_replay, cmd_report
from llm_planner.commands.lrtrace_shared import console, planner_config, progress_bar, stdout, vllm_engine, write_json
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
from llm_planner.sched.queues import POLICIES
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


def fail_rates(text: str) -> dict[str, float]:
    try:
        return parse_fail_rates(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def dtype_option(p) -> None:
    p.add_argument(
        "--dtype",
        choices=("float32", "bfloat16", "float16"),
        help="with --engine vllm: the engine's dtype (default: the config's, else bfloat16 on a CPU with "
        "native bf16). In bfloat16 a plan may change with the batch it is written in, so policies "
        "can end up executing different plans; float32 keeps them the same (docs/engine.md)",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="lrtrace", description=__doc__)
    parser.add_argument("--config", help="planner config (default: config/planner.yaml)")
    sub = parser.add_subparsers(dest="command", required=True)

    def sim_options(p):
        p.add_argument("workload", help="workload file (LRTrace or TimelyLLM artifact JSON) or preset name")
        p.add_argument("--traces", help="trace set (LRTrace or TimelyLLM artifact JSON); presets bring theirs")
        p.add_argument("--max-batch", type=int, help="override batch.max_batch_size")
        p.add_argument("--json", help="write {policy: {level: metrics}} here")
        p.add_argument("--markdown", help="write the tables as Markdown here")
        p.add_argument("--plots", help="folder for plots (default out/<workload>)")
        p.add_argument("--no-plots", action="store_true")
        p.add_argument("--timeline-tasks", help="comma-separated task ids for the timeline plot")
        p.add_argument("--quiet", action="store_true", help="no progress bar")
        p.add_argument(
            "--engine",
            choices=("sim", "vllm"),
            help="sim: recorded plans, profiled timing; vllm: plans generated live by the model "
            "(default: the config's engine)",
        )
        p.add_argument("--model", help="with --engine vllm: a local Hugging Face model folder (default: config)")
        dtype_option(p)
        p.add_argument("--duration", type=float, help="only the jobs arriving in the first N seconds")
        p.add_argument(
            "--speed",
            type=float,
            default=1.0,
            help="arrivals N times as fast (the workload's trigger times divided by N)",
        )
        p.add_argument(
            "--levels",
            help="only the jobs of these urgency levels, comma-separated (urgent: what any "
            "policy can reach for the urgent tasks with nothing else competing)",
        )
        p.add_argument(
            "--fail-rate",
            type=fail_rates,
            metavar="RATES",
            help="robots fail calls on purpose: a probability per skill (mf=0.1,g=0.05) or one for "
            "every skill (0.05), drawn from the seed; the planner replans (config replan)",
        )
        p.add_argument(
            "--replicas",
            help="engine replicas; compare: counts to compare, e.g. 1,2,4 (default: "
            "config). Several replicas of the real engine run as Ray actors",
        )
        p.add_argument(
            "--ray",
            action="store_true",
            help="several sim replicas run as Ray actors too (default: in this process; the results are the same)",
        )
        p.add_argument(
            "--placement",
            help="which replica a generation joins, with more than one: round-robin, "
            "least-tokens or deadline; compare: several, comma-separated "
            "(default: config)",
        )
        p.add_argument(
            "--check-sim",
            action="store_true",
            help="with --engine vllm: re-simulate each run with the sim engine, the real engine's "
            "profile and the generated plans, and print the timing error",
        )
        p.add_argument(
            "--decisions",
            metavar="FILE",
            help="write every scheduling decision, with its reason, here (JSON lines; see lrtrace explain)",
        )
        p.add_argument(
            "--live-view",
            type=int,
            metavar="PORT",
            help="serve the runs' channels to Foxglove on 127.0.0.1:PORT (0: any free port)",
        )
        p.add_argument("--view-mcap", metavar="FILE", help="write the live view's channels to this MCAP file")
        p.add_argument(
            "--save-traces",
            metavar="FILE",
            help="with --engine vllm: write the generated plans as a trace set, for the sim engine to "
            "replay (--traces FILE with the same workload)",
        )

    p = sub.add_parser("compare", help="simulate one workload under several policies")
    sim_options(p)
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
    sim_options(p)
    p.add_argument("--policy", default="timely")
    p.set_defaults(func=cmd_simulate)

    lrtrace_workloads.add_parsers(sub)

    p = sub.add_parser("replay", help="replay a workload live to a fleet over ROS 2, record it and report")
    p.add_argument("workload", help="workload file or preset name")
    p.add_argument("--traces")
    p.add_argument(
        "--start-fleet",
        action="store_true",
        help="start the planner and simulated robots for the workload's agents in this process",
    )
    p.add_argument("--policy", help="planner policy (with --start-fleet)")
    p.add_argument("--policies", help="comma-separated: replay the workload once per policy (with --start-fleet)")
    p.add_argument("--engine", choices=("sim", "vllm"), help="planner engine (with --start-fleet; default: config)")
    p.add_argument("--model", help="with --engine vllm: a local Hugging Face model folder")
    dtype_option(p)
    p.add_argument("--max-batch", type=int)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--repeat",
        type=int,
        default=1,
        metavar="N",
        help="replay the workload N times per policy, each time starting one policy further on, and "
        "report the runs together with each policy's gap to timely (or the first policy), run by run "
        "(± its standard error): live figures move from run to run with the machine's speed",
    )
    p.add_argument("--speed", type=float, default=1.0, help="arrival-time speed-up (2 = twice as fast)")
    p.add_argument(
        "--pace-engine",
        metavar="PROFILE",
        help="the engine profile the workload was written for: arrivals are spread by how much "
        "slower this machine's engine is (never compressed)",
    )
    p.add_argument("--duration", type=float, help="replay only the jobs arriving in the first N seconds")
    p.add_argument(
        "--levels",
        help="replay only the jobs of these urgency levels, comma-separated, at the whole "
        "workload's pace (urgent: what any policy can reach for them alone)",
    )
    p.add_argument(
        "--grace",
        type=float,
        help="after the last arrival, seconds to wait without any status change before giving up "
        "on the tasks still open (default: 60 + 3x the engine time of the workload's plans on "
        "this machine's profile)",
    )
    p.add_argument(
        "--fail-rate",
        type=fail_rates,
        metavar="RATES",
        help="with --start-fleet: the simulated robots fail calls on purpose (see compare)",
    )
    p.add_argument(
        "--record",
        help="MCAP file (default out/<workload>-live.mcap); with --start-fleet it also holds the live view's channels",
    )
    p.add_argument(
        "--live-view",
        type=int,
        metavar="PORT",
        help="with --start-fleet: serve the live view to Foxglove on 127.0.0.1:PORT (0: any free port)",
    )
    p.add_argument("--compare-sim", action="store_true", help="also simulate the workload and print the differences")
    p.add_argument(
        "--idle-check",
        action="store_true",
        help="first run each urgent task of the workload alone on the idle planner, and print its "
        "first action under load against that",
    )
    p.add_argument("--json", help="write {policy: {level: metrics}} here (the keys of compare --json)")
    p.add_argument("--quiet", action="store_true")
    p.set_defaults(func=cmd_replay)

    p = sub.add_parser("record", help="record /llm_planner/tasks and /llm_planner/status to MCAP")
    p.add_argument("output")
    p.add_argument("--duration", type=float, help="seconds (default: until Ctrl-C)")
    p.set_defaults(func=cmd_record)

    p = sub.add_parser("report", help="tables (and plots) from a recording")
    p.add_argument("recording")
    p.add_argument("--traces", help="trace set to name task types (default: the bundled one)")
    p.add_argument("--json")
    p.add_argument("--plots")
    p.set_defaults(func=cmd_report)

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
