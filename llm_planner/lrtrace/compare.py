"""Comparing policies on one workload: which runs (policies, the ablation's variants), running
them over the seeds, and the metrics of the result (`lrtrace compare` / `simulate`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from llm_planner.catalog.skills import load_skill_set
from llm_planner.catalog.tokenizer import load_tokenizer
from llm_planner.engine import Engine
from llm_planner.engine.factory import ReplicaPool
from llm_planner.lrtrace.composer import compose_preset, list_presets, load_preset, mean_exec_times, preset_traces
from llm_planner.lrtrace.formats import TraceSet, Workload
from llm_planner.lrtrace.load import load_traces, load_workload
from llm_planner.lrtrace.metrics import by_label, by_level, plan_stats, recovery, terminal_counts
from llm_planner.lrtrace.simulate import SimulationResult, planned_units, simulate
from llm_planner.sched.placement import PLACEMENTS
from llm_planner.sched.queues import POLICIES
from llm_planner.settings.config import PlannerConfig


@dataclass(frozen=True)
class WorkloadSource:
    """A workload file (kept for every seed) or a preset (composed anew per seed)."""

    name: str
    for_seed: Callable[[int], Workload]
    traces: TraceSet
    duration_s: float | None = None  # only the jobs arriving in the first this many seconds
    speed: float = 1.0  # arrivals this many times as fast (the workload's trigger times divided)

    def workload(self, seed: int) -> Workload:
        return cut(sped_up(self.for_seed(seed), self.speed), self.duration_s)


@dataclass(frozen=True)
class Variant:
    """One run of a comparison: its label in the tables, the policy and the config it runs."""

    label: str
    policy: str
    config: PlannerConfig


@dataclass
class Comparison:
    name: str
    runs: dict[str, list[SimulationResult]]  # label -> one result per seed
    results: dict[str, dict]  # label -> level -> metrics (the JSON of `compare --json`)

    def records(self, label: str) -> list:
        return [r for s in self.runs[label] for r in s.records]

    def by_label(self) -> dict[str, dict]:
        return {label: by_label(self.records(label)) for label in self.runs}

    def speed(self) -> dict[str, tuple[float, float, dict]]:
        """label -> (simulated seconds, wall seconds, terminal states)."""
        return {label: (sum(s.simulated_s for s in sims), sum(s.wall_s for s in sims),
                        terminal_counts(self.records(label))) for label, sims in self.runs.items()}


def parse_counts(text: str | None) -> list[int] | None:
    """`1,2,4` -> [1, 2, 4]."""
    if not text:
        return None
    counts = [int(n) for n in text.split(",") if n.strip()]
    if not counts or min(counts) < 1:
        raise ValueError(f"replica counts must be positive integers, got {text!r}")
    return counts


def _parse_names(text: str, known, what: str) -> list[str]:
    """`a,b` -> [a, b], each one of `known`."""
    names = [p.strip() for p in text.split(",") if p.strip()]
    unknown = [p for p in names if p not in known]
    if unknown or not names:
        raise ValueError(f"unknown {what} {unknown}; choose from {', '.join(known)}")
    return names


def parse_placements(text: str | None) -> list[str] | None:
    return _parse_names(text, PLACEMENTS, "placements") if text else None


def parse_policies(text: str) -> list[str]:
    return _parse_names(text, POLICIES, "policies")


def resolve_workload(spec: str, traces_path: str | None, config: PlannerConfig,
                     duration_s: float | None = None, speed: float = 1.0) -> WorkloadSource:
    """A workload file (LRTrace's format or the TimelyLLM artifact's) or a preset name."""
    if duration_s is not None and duration_s <= 0:
        raise ValueError("--duration must be > 0")
    if not speed > 0:
        raise ValueError("--speed must be > 0")
    path = Path(spec)
    if path.is_file():
        workload, _ = load_workload(path)
        if traces_path:
            traces = load_traces(traces_path)
        elif workload.preset:
            traces = preset_traces(load_preset(workload.preset))
        else:
            raise ValueError(f"{spec}: give the trace set with recorded plans: --traces T")
        return WorkloadSource(workload.name, lambda seed: workload, traces, duration_s, speed)
    if spec not in list_presets():
        raise ValueError(f"{spec!r} is neither a workload file nor a preset ({', '.join(list_presets())})")
    preset = load_preset(spec)
    traces = load_traces(traces_path) if traces_path else preset_traces(preset)
    means = mean_exec_times(traces, config.robot_types)
    return WorkloadSource(preset.name, lambda seed: compose_preset(preset, seed, traces, means), traces, duration_s,
                          speed)


def sped_up(workload: Workload, speed: float) -> Workload:
    """The workload with its arrivals `speed` times as fast (its trigger times divided)."""
    if speed == 1.0:
        return workload
    jobs = [j.model_copy(update={"arrival_s": j.arrival_s / speed}) for j in workload.jobs]
    return workload.model_copy(update={"jobs": jobs, "duration_s": workload.duration_s / speed})


def cut(workload: Workload, duration_s: float | None) -> Workload:
    """Only the jobs arriving in the first `duration_s` seconds."""
    if not duration_s:
        return workload
    jobs = [j for j in workload.jobs if j.arrival_s < duration_s]
    if not jobs:
        raise ValueError(f"no job of {workload.name} arrives in the first {duration_s:g} s "
                         f"(the first at {min(j.arrival_s for j in workload.jobs):.1f} s)")
    return workload.model_copy(update={"jobs": jobs, "duration_s": min(workload.duration_s, duration_s)})


def variants(policies: list[str], config: PlannerConfig, ablation: bool, replicas: list[int] | None = None,
             placements: list[str] | None = None) -> list[Variant]:
    """The policies, and with `ablation`, `timely` with each of what it adds to the paper
    switched off, and with the other segment-length estimate. With `replicas` (counts) or
    `placements`, each policy on each count of engine replicas, several of them under each
    placement (labels `timely x2 deadline`)."""
    if replicas or placements:
        runs = []
        for p in policies:
            for n in replicas or [config.replicas]:
                for placement in (placements or [config.placement]) if n > 1 else [config.placement]:
                    label = f"{p} x{n} {placement}" if n > 1 else f"{p} x1"
                    runs.append(Variant(label, p, config.model_copy(update={"replicas": n, "placement": placement})))
    else:
        runs = [Variant(p, p, config) for p in policies]
    if ablation:
        for feature in ("hold", "shrink", "keep_running", "bound_wait"):
            features = config.features.model_copy(update={feature: False})
            label = f"timely -{feature.replace('_', '-')}"
            runs.append(Variant(label, "timely", config.model_copy(update={"features": features})))
        other = "auto" if config.predictor == "none" else "none"
        runs.append(Variant(f"timely predictor={other}", "timely", config.model_copy(update={"predictor": other})))
    return runs


def executed_plan_stats(records, config: PlannerConfig) -> dict:
    return plan_stats(((load_skill_set(config.robot_type(r.request.robot_type).skill_set), r.plan) for r in records),
                      load_tokenizer(config.tokenizer))


def compare(source: WorkloadSource, runs_of: list[Variant], config: PlannerConfig, seeds: int,
            engine: Engine | None = None, tick: Callable[[str, int, float, float], None] | None = None,
            advance: Callable[[], None] | None = None, fail_rates: dict[str, float] | None = None,
            replica_pool: ReplicaPool | None = None) -> Comparison:
    """Every variant on every seed's workload. `tick(label, seed, simulated s, horizon s)`
    reports progress within a run, `advance()` the end of one. `fail_rates`: robots fail calls
    on purpose (catalog/faults.py); each run's results then hold `recovery`. `replica_pool`:
    the Ray actors that variants with several replicas run on."""
    if seeds < 1:
        raise ValueError("--seeds must be >= 1")
    tokenizer = load_tokenizer(config.tokenizer)
    runs: dict[str, list[SimulationResult]] = {v.label: [] for v in runs_of}
    for seed in range(seeds):
        workload = source.workload(seed)
        horizon = max((j.arrival_s for j in workload.jobs), default=0.0)
        for v in runs_of:
            progress = None if tick is None else (lambda t, v=v, seed=seed: tick(v.label, seed, t, horizon))
            runs[v.label].append(simulate(workload, source.traces, v.policy, v.config, seed, tokenizer,
                                          progress=progress, engine=engine, fail_rates=fail_rates,
                                          replica_pool=replica_pool))
            if advance is not None:
                advance()
    comparison = Comparison(source.name, runs, {})
    for label in runs:
        records = comparison.records(label)
        comparison.results[label] = by_level(records, planned_units(records, config))
    for label in runs:
        comparison.results[label]["plans"] = executed_plan_stats(comparison.records(label), config)
        if fail_rates:
            comparison.results[label]["recovery"] = recovery(comparison.records(label))
    recorded = recorded_plan_stats(source.traces, source.workload(0), config)
    if recorded is not None:
        comparison.results.setdefault("recorded traces", {})["plans"] = recorded
    return comparison


def recorded_plan_stats(traces: TraceSet, workload: Workload, config: PlannerConfig) -> dict | None:
    """Plan statistics of the workload's recorded plans, if its traces have any."""
    by_id = traces.by_id()
    recorded = [by_id[j.trace_id] for j in workload.jobs if j.trace_id in by_id and by_id[j.trace_id].plan]
    if not recorded:
        return None
    return plan_stats(((load_skill_set(config.robot_type(t.robot_type).skill_set), t.plan) for t in recorded),
                      load_tokenizer(config.tokenizer))


def engine_stats_lines(runs: dict[str, list[SimulationResult]]) -> list[str]:
    """What a real engine did in each run: generated tokens, prefix-cache use, resumes."""
    lines = []
    for label, sims in runs.items():
        stats = [s.engine_stats for s in sims]
        resumes = sum(sum(s.resumes.values()) for s in stats)
        prompt, cached = sum(s.prompt_tokens for s in stats), sum(s.cached_tokens for s in stats)
        r_prompt, r_cached = sum(s.resume_prompt_tokens for s in stats), sum(s.resume_cached_tokens for s in stats)
        lines.append(f"{label:12s} engine: {sum(s.generated_tokens for s in stats)} tokens in "
                     f"{sum(s.steps for s in stats)} steps ({sum(s.busy_s for s in stats):.1f} s busy); prefix cache "
                     f"{cached}/{prompt} prompt tokens"
                     + (f"; {resumes} resumes, {r_cached}/{r_prompt} of their prompt tokens cached" if resumes else ""))
    return lines
