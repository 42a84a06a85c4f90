"""Soak: a long live replay against a fleet process, watching the service's memory.

    python benchmarks/soak.py [--minutes 10] [--load 2] [--workload wid2] [--keep N] [--json F]

Starts `llm-planner-fleet` (planner node on the sim engine and one simulated robot per agent,
in real time) as its own process, replays WID2 composed at `--load` times its event rate for
`--minutes` over ROS 2 from this process, and samples the resident memory and threads of the
fleet process and the processes it started (the planner's robot links') every few seconds.
Reports the memory slope (least squares over the samples after the first minute, while tasks
keep arriving), the tasks per terminal status, and whether any published task was lost (no
terminal status) or duplicated (more than one). `--keep N` sets
the node's `finished_tasks_kept` parameter (default 5000), so a short run reaches the bound."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

import numpy as np
import yaml

from llm_planner.lrtrace.composer import compose_preset, load_preset, mean_exec_times, preset_traces
from llm_planner.lrtrace.formats import save
from llm_planner.settings.config import load_planner_config
from llm_planner.settings.fleet import fleet_for_agents
from llm_planner.testing.bench_result import write_bench_result

SAMPLE_S = 5.0
WARM_UP_S = 60.0


def process_memory(pid: int) -> tuple[float, int]:
    """(resident MiB, threads) of a process and the processes it started (the planner's robot
    links' process), from /proc."""
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
    rss, threads = int(fields["VmRSS"].split()[0]) / 1024, int(fields["Threads"])
    for task in Path(f"/proc/{pid}/task").iterdir():
        for child in (task / "children").read_text().split():
            try:
                child_rss, child_threads = process_memory(int(child))
            except (FileNotFoundError, ProcessLookupError):  # it ended meanwhile
                continue
            rss, threads = rss + child_rss, threads + child_threads
    return rss, threads


def slope_mib_per_min(samples: list[dict], arrivals_end_s: float) -> float | None:
    """Least-squares slope of resident memory while tasks arrive, after the warm-up."""
    steady = [s for s in samples if WARM_UP_S <= s["t_s"] <= arrivals_end_s]
    if len(steady) < 3:
        return None
    t = np.array([s["t_s"] for s in steady]) / 60.0
    rss = np.array([s["rss_mib"] for s in steady])
    return float(np.polyfit(t, rss, 1)[0])


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--workload", default="wid2", help="workload preset (config/workloads)")
    p.add_argument("--load", type=float, default=2.0, help="times the preset's event rate")
    p.add_argument("--minutes", type=float, default=10.0, help="how long tasks arrive")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--keep", type=int, help="the planner's finished_tasks_kept (ROS parameter)")
    p.add_argument("--json", help="result file (default out/bench/soak.json)")
    args = p.parse_args()

    import rclpy

    from llm_planner.lrtrace.jobs import agent_types
    from llm_planner.ros.replay import replay
    from llm_planner.ros.spin import spin_node
    from llm_planner.ros.task_client import TaskClient

    config = load_planner_config()
    preset = load_preset(args.workload)
    preset = preset.model_copy(update={"rate_per_s": preset.rate_per_s * args.load, "duration_s": args.minutes * 60})
    traces = preset_traces(preset)
    workload = compose_preset(preset, args.seed, traces, mean_exec_times(traces, config.robot_types))
    work = Path(tempfile.mkdtemp(prefix="soak-"))
    traces_file, fleet_file = work / "traces.yaml", work / "fleet.yaml"
    save(traces, traces_file)
    fleet = fleet_for_agents(agent_types(workload, traces), seed=args.seed)
    fleet_file.write_text(yaml.safe_dump(fleet.model_dump(mode="json")))
    print(f"{workload.name} at {args.load:g}x its rate: {len(workload.jobs)} tasks to {len(fleet.robots)} robots "
          f"over {args.minutes:g} min; fleet log in {work}", flush=True)

    log = (work / "fleet.log").open("w")
    command = ["llm-planner-fleet", "--fleet", str(fleet_file), "--traces", str(traces_file)]
    if args.keep:
        command += ["--ros-args", "-p", f"finished_tasks_kept:={args.keep}"]
    fleet_proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=os.environ)
    samples: list[dict] = []
    stop = threading.Event()
    started = time.monotonic()

    def sample() -> None:
        while not stop.is_set() and fleet_proc.poll() is None:
            rss, threads = process_memory(fleet_proc.pid)
            samples.append({"t_s": round(time.monotonic() - started, 1), "rss_mib": round(rss, 1), "threads": threads,
                            "ended": client.count_ended(ids) if client else 0})
            stop.wait(SAMPLE_S)

    rclpy.init()
    client = None
    ids = {j.task_id for j in workload.jobs}
    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    client = TaskClient("soak_client")
    spinning = spin_node(client)
    try:
        if not client.wait_for_planner(120):
            raise SystemExit(f"the fleet did not come up (log: {work / 'fleet.log'})")
        time.sleep(2.0)  # the robots' servers found by the planner ("fleet up" in the log)
        replay_start = time.monotonic() - started
        last = [0.0]

        def progress(done: int, published: int) -> None:
            if time.monotonic() - last[0] >= 30:
                last[0] = time.monotonic()
                rss = samples[-1]["rss_mib"] if samples else float("nan")
                print(f"  {time.monotonic() - started:6.0f} s: {published} published, {done} ended, "
                      f"fleet {rss:.0f} MiB", flush=True)

        complete = replay(client, workload, traces, config, 1.0, progress, grace_s=120.0)
        time.sleep(1.0)
    finally:
        stop.set()
        sampler.join()
        spinning.shutdown()
        fleet_proc.terminate()
        fleet_proc.wait(60)
        rclpy.try_shutdown()

    ended = {task_id: client.terminal(task_id) for task_id in ids}
    lost = sorted(t for t, status in ended.items() if status is None)
    duplicated = sorted(t for t in ids if client.terminal_counts[t] > 1)
    by_status = Counter(_state_name(s.state) for s in ended.values() if s is not None)
    arrivals_end = replay_start + max(j.arrival_s for j in workload.jobs)
    slope = slope_mib_per_min(samples, arrivals_end)
    result = {
        "workload": workload.name, "load": args.load, "minutes": args.minutes, "finished_tasks_kept": args.keep,
        "tasks": len(ids),
        "robots": len(fleet.robots), "complete": complete, "fleet_exit_code": fleet_proc.returncode,
        "terminal": dict(sorted(by_status.items())), "lost": lost, "duplicated": duplicated,
        "rss_mib_start": samples[0]["rss_mib"] if samples else None,
        "rss_mib_after_warm_up": next((s["rss_mib"] for s in samples if s["t_s"] >= WARM_UP_S), None),
        "rss_mib_end": samples[-1]["rss_mib"] if samples else None,
        "rss_mib_max": max(s["rss_mib"] for s in samples) if samples else None,
        "rss_slope_mib_per_min": slope, "threads_max": max(s["threads"] for s in samples) if samples else None,
        "threads_end": samples[-1]["threads"] if samples else None, "samples": samples,
    }
    print(f"tasks: {len(ids)} published; terminal: {dict(by_status)}; lost {len(lost)}, duplicated {len(duplicated)}")
    print(f"fleet process memory: {result['rss_mib_start']} MiB at start, {result['rss_mib_after_warm_up']} after "
          f"{WARM_UP_S:.0f} s, {result['rss_mib_end']} at the end (max {result['rss_mib_max']}); slope while tasks "
          f"arrive: {slope if slope is None else round(slope, 2)} MiB/min; threads max {result['threads_max']}, "
          f"at the end {result['threads_end']}; fleet exit code {fleet_proc.returncode}")
    write_bench_result(args.json, "soak", result, notes="the fleet process's memory and threads over a long replay")
    return 0 if complete and not lost and not duplicated and fleet_proc.returncode == 0 else 1


def _state_name(state: int) -> str:
    from llm_planner.domain.tasks import TaskState

    return TaskState(state).name


if __name__ == "__main__":
    sys.exit(main())
