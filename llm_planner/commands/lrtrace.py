"""`lrtrace`: compose, import, simulate and compare robot LLM workloads."""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from pathlib import Path
from typing import Callable

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from llm_planner.catalog.skills import load_skill_set
from llm_planner.catalog.tokenizer import load_tokenizer
from llm_planner.commands.quiet import route_library_output
from llm_planner.lrtrace import report
from llm_planner.lrtrace.composer import compose_preset, list_presets, load_preset, mean_exec_times, preset_traces
from llm_planner.lrtrace.formats import FormatError, TraceSet, Workload, save
from llm_planner.lrtrace.load import load_traces, load_workload
from llm_planner.lrtrace.metrics import by_label, by_level, plan_stats, task_differences, terminal_counts
from llm_planner.lrtrace.simulate import SimulationResult, planned_units, simulate
from llm_planner.sched.queues import POLICIES
from llm_planner.settings.config import load_planner_config
from llm_planner.settings.model_file import ConfigError

console = Console(stderr=True)


def _stdout() -> Console:
    # Piped output (CI logs, files) gets wide lines instead of 80-column wrapping.
    return Console() if sys.stdout.isatty() else Console(width=150)


class CliError(Exception):
    pass


def _parse_policies(text: str) -> list[str]:
    names = [p.strip() for p in text.split(",") if p.strip()]
    unknown = [p for p in names if p not in POLICIES]
    if unknown or not names:
        raise CliError(f"unknown policies {unknown}; choose from {', '.join(POLICIES)}")
    return names


def _config(args):
    try:
        config = load_planner_config(args.config)
    except ConfigError as exc:
        raise CliError(str(exc)) from None
    if getattr(args, "engine", None):
        config = config.model_copy(update={"engine": args.engine})
    if getattr(args, "max_batch", None):
        config = config.model_copy(update={"batch": config.batch.model_copy(update={"max_batch_size": args.max_batch})})
    return config


def resolve_workload(spec: str, traces_path: str | None, config) -> tuple[str, Callable[[int], Workload], TraceSet]:
    """A workload file (LRTrace's format or the TimelyLLM artifact's) or a preset name (composed per seed)."""
    path = Path(spec)
    if path.is_file():
        workload, texts = load_workload(path)
        if traces_path:
            traces = load_traces(traces_path)
        elif workload.preset:
            traces = preset_traces(load_preset(workload.preset))
        else:
            raise CliError(f"{spec}: give the trace set with recorded plans: --traces T")
        return workload.name, (lambda seed: workload), traces
    if spec not in list_presets():
        raise CliError(f"{spec!r} is neither a workload file nor a preset ({', '.join(list_presets())})")
    preset = load_preset(spec)
    traces = load_traces(traces_path) if traces_path else preset_traces(preset)
    means = mean_exec_times(traces, config.robot_types)
    return preset.name, (lambda seed: compose_preset(preset, seed, traces, means)), traces


def _cut(workload: Workload, duration: float | None) -> Workload:
    """Only the jobs arriving in the first `duration` seconds."""
    if not duration:
        return workload
    if duration <= 0:
        raise CliError("--duration must be > 0")
    jobs = [j for j in workload.jobs if j.arrival_s < duration]
    if not jobs:
        raise CliError(f"no job of {workload.name} arrives in the first {duration:g} s "
                       f"(the first at {min(j.arrival_s for j in workload.jobs):.1f} s)")
    return workload.model_copy(update={"jobs": jobs, "duration_s": min(workload.duration_s, duration)})


def _variants(policies: list[str], config, ablation: bool) -> list[tuple[str, str, object]]:
    """(label, policy, config) of each run: the policies, and with `ablation`, `timely` with
    each of what it adds to the paper switched off, and with the other length estimate."""
    runs = [(p, p, config) for p in policies]
    if ablation:
        for feature in ("hold", "shrink", "keep_running"):
            features = config.features.model_copy(update={feature: False})
            label = f"timely -{feature.replace('_', '-')}"
            runs.append((label, "timely", config.model_copy(update={"features": features})))
        other = "auto" if config.predictor == "none" else "none"
        runs.append((f"timely predictor={other}", "timely", config.model_copy(update={"predictor": other})))
    return runs


def _plan_stats(label_records: dict[str, list], traces: TraceSet, workload_jobs, config) -> dict[str, dict]:
    """Plan statistics of each run's executed plans and of the workload's recorded plans."""
    out = {label: _executed_plan_stats(records, config) for label, records in label_records.items()}
    by_id = traces.by_id()
    recorded = [by_id[j.trace_id] for j in workload_jobs if j.trace_id in by_id and by_id[j.trace_id].plan]
    if recorded:
        out["recorded traces"] = plan_stats(((load_skill_set(config.robot_type(t.robot_type).skill_set), t.plan)
                                             for t in recorded), load_tokenizer(config.tokenizer))
    return out


def cmd_compare(args) -> int:
    config = _config(args)
    policies = _parse_policies(args.policies)
    variants = _variants(policies, config, args.ablation)
    if args.seeds < 1:
        raise CliError("--seeds must be >= 1")
    name, workload_for, traces = resolve_workload(args.workload, args.traces, config)
    tokenizer = load_tokenizer(config.tokenizer)
    engine = None
    if config.engine == "vllm":
        from llm_planner.domain.clock import VirtualClock
        from llm_planner.engine.factory import make_watched_vllm_engine

        console.print(f"starting vLLM with {args.model or config.vllm.model} ...")
        engine = make_watched_vllm_engine(config, VirtualClock(), args.model)
    runs: dict[str, list[SimulationResult]] = {label: [] for label, _, _ in variants}
    progress = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                        TextColumn("{task.fields[status]}"), TimeElapsedColumn(), console=console,
                        disable=args.quiet)
    with progress:
        overall = progress.add_task(f"{name}", total=args.seeds * len(variants), status="")
        for seed in range(args.seeds):
            workload = _cut(workload_for(seed), args.duration)
            for label, policy, run_config in variants:
                horizon = max((j.arrival_s for j in workload.jobs), default=0.0)

                def tick(t: float, label=label, seed=seed) -> None:
                    progress.update(overall, status=f"seed {seed} {label}: {t:6.0f}/{horizon:.0f} s simulated")

                runs[label].append(simulate(workload, traces, policy, run_config, seed, tokenizer, progress=tick,
                                            engine=engine))
                progress.advance(overall)
    results, labels, speed = {}, {}, {}
    for policy, sims in runs.items():
        records = [r for s in sims for r in s.records]
        results[policy] = by_level(records, planned_units(records, config))
        labels[policy] = by_label(records)
        sim_s, wall_s = sum(s.simulated_s for s in sims), sum(s.wall_s for s in sims)
        speed[policy] = (sim_s, wall_s, terminal_counts(records))
    plans = _plan_stats({label: [r for s in sims for r in s.records] for label, sims in runs.items()},
                        traces, _cut(workload_for(0), args.duration).jobs, config)
    for label, stats in plans.items():
        results.setdefault(label, {})["plans"] = stats
    engine_name = (f"engine vllm ({engine.model_dir})" if engine is not None
                   else f"profile {config.engine_profile}")
    title = f"{name}: {args.seeds} seed(s), {engine_name}, max batch {config.batch.max_batch_size}"
    out = _stdout()
    report.print_tables(results, title, out)
    for policy, (sim_s, wall_s, counts) in speed.items():
        out.print(f"{policy:15s} simulated {sim_s:8.1f} s in {wall_s:6.2f} s wall "
                  f"({sim_s / max(wall_s, 1e-9):7.0f} simulated s per wall s); tasks: {counts}")
    if args.markdown:
        Path(args.markdown).write_text(report.markdown_tables(results))
    if engine is not None:
        _print_engine_stats(runs, out)
        if args.check_sim:
            simulated = _check_sim(runs, results, variants, workload_for, traces, args, out, engine.profile_choice.path)
            results.update({f"{label} (sim)": levels for label, levels in simulated.items()})
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
        out.print(f"wrote {args.json}")
    if not args.no_plots:
        folder = Path(args.plots or Path("out") / name)
        folder.mkdir(parents=True, exist_ok=True)
        bars = report.plot_utility_by_task(labels, folder / "utility_by_task.png")
        first = {p: sims[0].records for p, sims in runs.items()}
        chosen = args.timeline_tasks.split(",") if args.timeline_tasks else report.pick_timeline_tasks(first[policies[0]])
        timeline = report.plot_timeline(first, chosen, folder / "timeline.png")
        out.print(f"plots: {bars}, {timeline} (timeline: seed 0, tasks {', '.join(chosen)})")
    return 0


def _print_engine_stats(runs: dict[str, list[SimulationResult]], out) -> None:
    """What the real engine did: generated tokens, prefix-cache use, resumes."""
    for policy, sims in runs.items():
        stats = [s.engine_stats for s in sims]
        resumes = sum(sum(s.resumes.values()) for s in stats)
        prompt, cached = sum(s.prompt_tokens for s in stats), sum(s.cached_tokens for s in stats)
        r_prompt, r_cached = sum(s.resume_prompt_tokens for s in stats), sum(s.resume_cached_tokens for s in stats)
        out.print(f"{policy:12s} engine: {sum(s.generated_tokens for s in stats)} tokens in {sum(s.steps for s in stats)} "
                  f"steps ({sum(s.busy_s for s in stats):.1f} s busy); prefix cache {cached}/{prompt} prompt tokens"
                  + (f"; {resumes} resumes, {r_cached}/{r_prompt} of their prompt tokens cached" if resumes else ""))


TIMINGS = {
    "first token": lambda r: r.first_token_s - r.request.arrival_s,
    "plan generated": lambda r: r.plan_done_s - r.request.arrival_s,
    "first action": lambda r: r.response_time_s,
}


def _check_sim(runs: dict[str, list[SimulationResult]], real_levels: dict[str, dict], variants, workload_for,
               traces, args, out, profile: Path) -> dict[str, dict]:
    """Re-run each real-engine run in the `sim` engine with the engine profile of the real
    engine and the plans it generated; print how far the simulated task timings are off and
    both utilities side by side (does the simulation pick the same winner?). Returns the
    simulated metrics by run label."""
    from rich.table import Table

    setups = {label: (policy, cfg.model_copy(update={"engine": "sim", "engine_profile": str(profile)}))
              for label, policy, cfg in variants}
    simulated_levels: dict[str, dict] = {}

    table = Table(title=f"sim ({profile.stem}) vs real vLLM engine, same plans, per task")
    for col in ("policy", "timing", "real mean s", "sim mean s", "mean |error| s", "mean |error| %"):
        table.add_column(col, justify="left" if col in ("policy", "timing") else "right")
    for policy, sims in runs.items():
        errors: dict[str, list[tuple[float, float]]] = {k: [] for k in TIMINGS}
        sim_records = []
        for real in sims:
            plans = {r.request.task_id: r.plan for r in real.records}
            workload = _cut(workload_for(real.seed), args.duration)
            name, sim_config = setups[policy]
            simulated = simulate(workload, traces, name, sim_config, real.seed, plans=plans, warm_up=True)
            sim_records += simulated.records
            by_task = {r.request.task_id: r for r in simulated.records}
            for r in real.records:
                s = by_task[r.request.task_id]
                for key, get in TIMINGS.items():
                    a, b = get(r), get(s)
                    if math.isfinite(a) and math.isfinite(b):
                        errors[key].append((a, b))
        for key, pairs in errors.items():
            if not pairs:
                continue
            real_mean = sum(a for a, _ in pairs) / len(pairs)
            sim_mean = sum(b for _, b in pairs) / len(pairs)
            abs_err = sum(abs(a - b) for a, b in pairs) / len(pairs)
            table.add_row(policy, key, f"{real_mean:.3f}", f"{sim_mean:.3f}", f"{abs_err:.3f}",
                          f"{100 * abs_err / real_mean:.1f}" if real_mean > 0 else "-")
        simulated_levels[policy] = by_level(sim_records, planned_units(sim_records, setups[policy][1]))
    out.print(table)
    real_levels = {label: real_levels[label] for label in runs}  # the runs' own (not e.g. "recorded traces")
    agreement = Table(title="utility % of max: real engine vs sim (same plans)")
    levels = [lvl for lvl in report.level_names(real_levels) if lvl != "all"] + ["all"]
    agreement.add_column("policy")
    for level in levels:
        agreement.add_column(f"{level} real", justify="right")
        agreement.add_column(f"{level} sim", justify="right")
    for label in runs:
        agreement.add_row(label, *(report._fmt((per.get(level) or {}).get("utility_pct_of_max"))
                                   for level in levels for per in (real_levels[label], simulated_levels[label])))
    out.print(agreement)
    for level in levels:
        best_real, best_sim = _best(real_levels, level), _best(simulated_levels, level)
        out.print(f"{level}: best on the real engine {', '.join(best_real)}; in simulation {', '.join(best_sim)}"
                  + (" - they agree" if set(best_real) & set(best_sim) else " - they DISAGREE"))
    return simulated_levels


def _best(results: dict[str, dict], level: str) -> list[str]:
    """The runs with the highest utility % of max at `level` (all of them when tied)."""
    values = {label: (per.get(level) or {}).get("utility_pct_of_max") for label, per in results.items()}
    top = max((v for v in values.values() if v is not None), default=None)
    return [label for label, v in values.items() if v is not None and v == top]


def _agreement(live: dict, sim: dict) -> list[tuple[str, str, object, object, object]]:
    rows = []
    for level in (lvl for lvl, metrics in live.items() if "utility_pct_of_max" in metrics):
        for key in ("utility_pct_of_max", "response_p50_s", "response_p95_s", "waiting_mean_s", "tasks"):
            a, b = live[level].get(key), sim.get(level, {}).get(key)
            diff = None if a is None or b is None else round(a - b, 4)
            rows.append((level, key, a, b, diff))
    return rows


def _executed_plan_stats(records, config) -> dict:
    return plan_stats(((load_skill_set(config.robot_type(r.request.robot_type).skill_set), r.plan) for r in records),
                      load_tokenizer(config.tokenizer))


def _urgent_first_actions(client, workload, traces, config, idle: dict[int, float]) -> dict | None:
    """Urgent first action (publish -> first segment sent) under load vs the same urgent
    tasks alone on the idle planner, p50 of each and their ratio."""
    from llm_planner.ros.replay import first_action_s

    loaded = [first_action_s(client, j.task_id) for j in workload.jobs if j.trace_id in idle]
    loaded = [x for x in loaded if x is not None]
    if not idle or not loaded:
        return None
    idle_p50 = statistics.median(idle[j.trace_id] for j in workload.jobs if j.trace_id in idle)
    load_p50 = statistics.median(loaded)
    return {"idle_p50_s": round(idle_p50, 4), "load_p50_s": round(load_p50, 4), "ratio": round(load_p50 / idle_p50, 3)}


def _replay_once(args, config, name, workload, traces, record_path: Path, engine) -> tuple[bool, int, dict | None]:
    """One live replay under config.policy: (all tasks ended in time, messages recorded,
    urgent first actions under load vs idle when --idle-check)."""
    import rclpy

    from llm_planner.lrtrace.jobs import agent_types
    from llm_planner.ros.replay import Recorder, idle_first_actions, replay
    from llm_planner.ros.spin import spin_node
    from llm_planner.ros.task_client import TaskClient
    from llm_planner.settings.fleet import fleet_for_agents

    owns_rclpy = not rclpy.ok()
    if owns_rclpy:
        rclpy.init()
    fleet = None
    client = recorder = spinning = None
    try:
        if args.start_fleet:
            from llm_planner.ros.fleet_main import Fleet

            traces_file = Path("out") / f"{name}-traces.yaml"
            traces_file.parent.mkdir(parents=True, exist_ok=True)
            save(traces, traces_file)
            fleet_config = fleet_for_agents(agent_types(workload, traces), seed=args.seed)
            fleet = Fleet(config, fleet_config, traces=[str(traces_file)], engine=engine).start()
            if fleet.unreachable:
                raise CliError(f"robots did not come up: {fleet.unreachable}")
        client = TaskClient("lrtrace_replay")
        spinning = spin_node(client)
        if not client.wait_for_planner(20):
            raise CliError("no planner is subscribed to /llm_planner/tasks (start one, or pass --start-fleet)")
        idle = {}
        if args.idle_check:  # before recording: these tasks are not part of the workload's figures
            console.print(f"{config.policy}: urgent tasks alone on the idle planner ...")
            idle = idle_first_actions(client, workload, traces, config)
        recorder = Recorder(client, record_path)
        time.sleep(0.5)  # let the recorder's subscriptions match too
        progress = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                            TextColumn("{task.fields[status]}"), TimeElapsedColumn(), console=console,
                            disable=args.quiet)
        with progress:
            bar = progress.add_task(f"{name} live ({config.policy})", total=len(workload.jobs), status="")

            def tick(done: int, published: int) -> None:
                progress.update(bar, completed=done, status=f"{published} published, {done} finished")

            complete = replay(client, workload, traces, config, args.speed, tick, grace_s=args.grace)
        time.sleep(0.5)
        first_actions = _urgent_first_actions(client, workload, traces, config, idle)
    finally:
        if recorder is not None:
            recorder.close()
        if spinning is not None:
            spinning.shutdown()
        elif client is not None:
            client.destroy_node()
        if fleet is not None:
            fleet.shutdown()
        if owns_rclpy:
            rclpy.try_shutdown()
    return complete, recorder.count, first_actions


def _pace_to_engine(args, config, workload: Workload, engine) -> tuple[float, float]:
    """(arrival speed-up, grace seconds) for a live replay. With --pace-engine REF, arrivals
    are spread by how much slower this machine's engine generates the workload's plans than
    the REF profile (the machine the workload was written for). --grace auto waits (without
    any status change) a minute plus three times this machine's engine time for the plans."""
    from llm_planner.engine.profile import load_engine_profile
    from llm_planner.lrtrace.pace import pace_for

    profile = engine.profile if engine is not None else load_engine_profile(config.engine_profile)
    reference = load_engine_profile(args.pace_engine) if args.pace_engine else None
    pace = pace_for(profile, reference, len(workload.jobs), config)
    if reference is not None:
        console.print(f"pace: this machine's engine ({profile.name}) needs {pace.here_s:.0f} s for the workload's "
                      f"{len(workload.jobs)} plans, {args.pace_engine} {pace.reference_s:.0f} s: "
                      f"arrivals {pace.slowdown:.2f}x further apart")
    grace = args.grace if args.grace is not None else pace.grace_s()
    return args.speed / pace.slowdown, grace


def cmd_replay(args) -> int:
    from llm_planner.ros.replay import first_sent_after_arrival, records_from_recording

    config = _config(args)
    policies = _parse_policies(args.policies or args.policy or config.policy)
    name, workload_for, traces = resolve_workload(args.workload, args.traces, config)
    workload = _cut(workload_for(args.seed), args.duration)
    engine = None
    if config.engine == "vllm" and args.start_fleet:
        from llm_planner.domain.clock import WallClock
        from llm_planner.engine.cpu import cpu_info
        from llm_planner.engine.factory import make_watched_vllm_engine

        console.print(f"starting vLLM with {args.model or config.vllm.model} ...")
        engine = make_watched_vllm_engine(config, WallClock(), args.model)  # shared by the policies' runs
        console.print(f"engine: {engine.dtype} on {cpu_info().describe()}, profile {engine.profile_choice.describe()}")
    args.speed, args.grace = _pace_to_engine(args, config, workload, engine)
    console.print(f"grace for the last tasks: {args.grace:.0f} s")
    out = _stdout()
    live, sims, differences, complete = {}, {}, {}, True
    for policy in policies:
        run_config = config.model_copy(update={"policy": policy})
        default_path = Path("out") / (f"{name}-live.mcap" if len(policies) == 1 else f"{name}-{policy}-live.mcap")
        record_path = Path(args.record) if args.record and len(policies) == 1 else default_path
        if args.record and len(policies) > 1:
            record_path = Path(args.record).with_name(f"{Path(args.record).stem}-{policy}.mcap")
        done, count, first_actions = _replay_once(args, run_config, name, workload, traces, record_path, engine)
        complete &= done
        records = records_from_recording(record_path, run_config, traces)
        live[policy] = by_level(records)
        live[policy]["plans"] = _executed_plan_stats(records, config)
        out.print(f"{policy}: recorded {count} messages to {record_path}; tasks: {terminal_counts(records)}"
                  + ("" if done else " - NOT all tasks ended within the grace time"))
        if first_actions:
            live[policy]["urgent_first_action"] = first_actions
            out.print(f"{policy}: urgent first action (task published -> first segment sent) p50 "
                      f"{first_actions['load_p50_s']:.3f} s under load, {first_actions['idle_p50_s']:.3f} s for the "
                      f"same tasks on the idle planner: {first_actions['ratio']:.2f}x")
        if args.compare_sim:
            from llm_planner.lrtrace.simulate import simulate

            # a real engine is reused on a virtual clock
            result = simulate(workload, traces, policy, run_config, args.seed, load_tokenizer(config.tokenizer),
                              engine=engine, warm_up=True)
            sims[policy] = by_level(result.records)
            differences[policy] = task_differences(records, result.records, first_sent_after_arrival(record_path))
    engine_name = f"vLLM {engine.model_dir}" if engine is not None else f"sim engine {config.engine_profile}"
    report.print_tables(live, f"{name} live over ROS 2 ({engine_name})", out)
    result = dict(live)  # the keys of `compare --json`; with --compare-sim also "<policy> (sim)"
    if args.compare_sim:
        result.update({f"{policy} (sim)": levels for policy, levels in sims.items()})
        from rich.table import Table

        for policy in policies:
            table = Table(title=f"live vs simulated ({policy}, same workload)")
            for col in ("level", "metric", "live", "simulated", "live - sim"):
                table.add_column(col, justify="right" if col not in ("level", "metric") else "left")
            for row in _agreement(live[policy], sims[policy]):
                table.add_row(*(report._fmt(v) if not isinstance(v, str) else v for v in row))
            out.print(table)
            out.print(report.differences_table(differences[policy], f"largest live - simulated response ({policy})"))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    return 0 if complete else 1


def cmd_record(args) -> int:
    import rclpy

    from llm_planner.ros.replay import Recorder
    from llm_planner.ros.spin import spin_node
    from llm_planner.ros.task_client import TaskClient

    rclpy.init()
    node = TaskClient("lrtrace_recorder")
    recorder = Recorder(node, args.output)
    spinning = spin_node(node)
    _stdout().print(f"recording /llm_planner/tasks and /llm_planner/status to {args.output}"
                    + (f" for {args.duration:.0f} s" if args.duration else "; Ctrl-C to stop"))
    deadline = time.monotonic() + args.duration if args.duration else math.inf
    try:
        # rclpy's SIGINT handler shuts the context down: that ends the recording too
        while rclpy.ok() and time.monotonic() < deadline:
            time.sleep(0.2)
    except KeyboardInterrupt:
        pass
    finally:
        recorder.close()
        spinning.shutdown()
        rclpy.try_shutdown()
    _stdout().print(f"wrote {recorder.count} messages to {args.output}")
    return 0


def cmd_report(args) -> int:
    from llm_planner.ros.replay import default_traces, records_from_recording

    config = _config(args)
    traces = load_traces(args.traces or default_traces())
    records = records_from_recording(args.recording, config, traces)
    if not records:
        raise CliError(f"{args.recording}: no finished tasks recorded")
    results = {config.policy: by_level(records)}
    results[config.policy]["plans"] = _executed_plan_stats(records, config)
    out = _stdout()
    report.print_tables(results, f"{args.recording} ({config.policy})", out)
    out.print(f"tasks: {terminal_counts(records)}")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    if args.plots:
        folder = Path(args.plots)
        folder.mkdir(parents=True, exist_ok=True)
        report.plot_utility_by_task({config.policy: by_label(records)}, folder / "utility_by_task.png")
        out.print(f"plots: {folder / 'utility_by_task.png'}")
    return 0


def cmd_simulate(args) -> int:
    args.policies = args.policy
    args.seeds = 1
    args.ablation = False
    return cmd_compare(args)


def cmd_compose(args) -> int:
    config = _config(args)
    if args.preset:
        preset = load_preset(args.preset)
        traces = load_traces(args.traces) if args.traces else preset_traces(preset)
        workload = compose_preset(preset, args.seed, traces, mean_exec_times(traces, config.robot_types))
    else:
        from llm_planner.lrtrace.composer import compose

        if not (args.traces and args.trace_ids and args.rate and args.max_tpe and args.agents and args.duration):
            raise CliError("without a preset, give --traces, --trace-ids, --rate, --max-tpe, --agents and --duration")
        traces = load_traces(args.traces)
        ids = [int(x) for x in args.trace_ids.split(",")]
        workload = compose(traces, ids, args.rate, args.max_tpe, args.agents, args.duration, args.seed,
                           exec_mean_s=mean_exec_times(traces, config.robot_types), name=Path(args.output).stem)
    save(workload, args.output)
    _stdout().print(f"wrote {args.output}: {len(workload.jobs)} jobs over {workload.duration_s:.0f} s, "
                    f"{workload.agents} agents")
    return 0


def cmd_import(args) -> int:
    raw_path = Path(args.file)
    try:
        traces = load_traces(raw_path)
        save(traces, args.output)
        _stdout().print(f"wrote {args.output}: trace set with {len(traces.traces)} traces")
        return 0
    except FormatError:
        pass
    workload, texts = load_workload(raw_path)
    save(workload, args.output)
    _stdout().print(f"wrote {args.output}: workload with {len(workload.jobs)} jobs")
    if args.texts:
        save(texts, args.texts)
        _stdout().print(f"wrote {args.texts}: task texts of {len(texts.traces)} traces (no plans)")
    return 0


def cmd_presets(args) -> int:
    for name in list_presets():
        p = load_preset(name)
        _stdout().print(f"{name}: {p.description} (rate {p.rate_per_s}/s, up to {p.max_tasks_per_event} per event, "
                        f"{p.agents} agents, {p.duration_s:.0f} s, traces {p.trace_ids})")
    return 0


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
        p.add_argument("--engine", choices=("sim", "vllm"),
                       help="sim: recorded plans, profiled timing; vllm: plans generated live by the model "
                            "(default: the config's engine)")
        p.add_argument("--model", help="with --engine vllm: a local Hugging Face model folder (default: config)")
        p.add_argument("--duration", type=float, help="only the jobs arriving in the first N seconds")
        p.add_argument("--check-sim", action="store_true",
                       help="with --engine vllm: re-simulate each run with the sim engine, the real engine's "
                            "profile and the generated plans, and print the timing error")

    p = sub.add_parser("compare", help="simulate one workload under several policies")
    sim_options(p)
    p.add_argument("--policies", default=",".join(POLICIES))
    p.add_argument("--ablation", action="store_true",
                   help="also run timely with each of hold, shrink and keep-running switched off, and with "
                        "the other segment-length estimate (predictor none vs auto)")
    p.add_argument("--seeds", type=int, default=1,
                   help="runs per policy; a preset is recomposed per seed, a file's jobs are kept "
                        "and the seed draws the execution times not recorded in the jobs")
    p.set_defaults(func=cmd_compare)

    p = sub.add_parser("simulate", help="simulate one workload under one policy")
    sim_options(p)
    p.add_argument("--policy", default="timely")
    p.set_defaults(func=cmd_simulate)

    p = sub.add_parser("compose", help="compose a workload (a preset or your own parameters)")
    p.add_argument("--preset", help=f"one of: {', '.join(list_presets())}")
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

    p = sub.add_parser("replay", help="replay a workload live to a fleet over ROS 2, record it and report")
    p.add_argument("workload", help="workload file or preset name")
    p.add_argument("--traces")
    p.add_argument("--start-fleet", action="store_true",
                   help="start the planner and simulated robots for the workload's agents in this process")
    p.add_argument("--policy", help="planner policy (with --start-fleet)")
    p.add_argument("--policies", help="comma-separated: replay the workload once per policy (with --start-fleet)")
    p.add_argument("--engine", choices=("sim", "vllm"), help="planner engine (with --start-fleet; default: config)")
    p.add_argument("--model", help="with --engine vllm: a local Hugging Face model folder")
    p.add_argument("--max-batch", type=int)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--speed", type=float, default=1.0, help="arrival-time speed-up (2 = twice as fast)")
    p.add_argument("--pace-engine", metavar="PROFILE",
                   help="the engine profile the workload was written for: arrivals are spread by how much "
                        "slower this machine's engine is (never compressed)")
    p.add_argument("--duration", type=float, help="replay only the jobs arriving in the first N seconds")
    p.add_argument("--grace", type=float,
                   help="after the last arrival, seconds to wait without any status change before giving up "
                        "on the tasks still open (default: 60 + 3x the engine time of the workload's plans on "
                        "this machine's profile)")
    p.add_argument("--record", help="MCAP file (default out/<workload>-live.mcap)")
    p.add_argument("--compare-sim", action="store_true", help="also simulate the workload and print the differences")
    p.add_argument("--idle-check", action="store_true",
                   help="first run each urgent task of the workload alone on the idle planner, and print its "
                        "first action under load against that")
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

    p = sub.add_parser("presets", help="list workload presets")
    p.set_defaults(func=cmd_presets)
    for p in sub.choices.values():
        p.add_argument("--verbose", action="store_true",
                       help="show the libraries' messages (vLLM, torch, ROS 2 logs) here instead of in out/lrtrace.log")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if argv is None and not args.verbose:  # run as a command: keep its terminal for its own output
        log = route_library_output(Path("out") / "lrtrace.log", [console])
        console.print(f"[dim]library messages go to {log} (--verbose shows them here)[/dim]")
    try:
        return args.func(args)
    except (CliError, FormatError, ConfigError, ValueError, FileNotFoundError) as exc:
        console.print(f"[red]lrtrace {args.command}: {exc}[/red]")
        return 2


if __name__ == "__main__":
    sys.exit(main())
