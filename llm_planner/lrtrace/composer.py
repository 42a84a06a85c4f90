"""Compose workloads: Poisson events; each event issues up to Max-TPE tasks, 1 ms apart, to
agents that are free (an agent still busy with its previous task gets none)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from llm_planner.catalog.exec_model import load_exec_model
from llm_planner.catalog.skills import load_skill_set
from llm_planner.lrtrace.formats import Job, Trace, TraceSet, Workload

# Margin on an agent's expected busy time (plan generation + execution) before it counts as
from llm_planner.lrtrace.load import load_traces
from llm_planner.settings.model_file import load_model_file
from llm_planner.settings.paths import data_path, resolve_resource

# free again; covers planning delays under contention.
BUSY_MARGIN = 1.5


class WorkloadPreset(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    description: str
    trace_set: str
    trace_ids: list[int] = Field(min_length=1)
    rate_per_s: float = Field(gt=0)
    max_tasks_per_event: int = Field(ge=1)
    agents: int = Field(ge=1)
    duration_s: float = Field(gt=0)
    job_interval_s: float = Field(default=0.001, ge=0)


def list_presets() -> list[str]:
    return sorted(p.stem for p in data_path("config", "workloads").glob("*.yaml"))


def load_preset(name_or_path: str | Path) -> WorkloadPreset:
    path = resolve_resource(name_or_path, "config/workloads")
    return load_model_file(WorkloadPreset, path, "workload preset")


def preset_traces(preset: WorkloadPreset) -> TraceSet:
    return load_traces(resolve_resource(preset.trace_set, "config/traces"))


def expected_busy_s(trace: Trace, exec_mean_s: float) -> float:
    return BUSY_MARGIN * ((trace.plan_time_s or 0.0) + exec_mean_s)


def compose(
    traces: TraceSet,
    trace_ids: list[int],
    rate_per_s: float,
    max_tasks_per_event: int,
    agents: int,
    duration_s: float,
    seed: int,
    job_interval_s: float = 0.001,
    exec_mean_s: dict[int, float] | None = None,
    name: str = "workload",
    preset: str | None = None,
) -> Workload:
    """Deterministic for a given seed. exec_mean_s: expected execution time per trace (for
    the busy check); defaults to the trace's recorded times, else 0."""
    by_id = traces.by_id()
    missing = [t for t in trace_ids if t not in by_id]
    if missing:
        raise ValueError(f"trace ids {missing} are not in trace set {traces.name}")
    if exec_mean_s is None:
        exec_mean_s = {t: sum(by_id[t].exec_times_s or []) for t in trace_ids}
    rng = np.random.default_rng(seed)
    busy_until = np.zeros(agents)
    jobs: list[Job] = []
    t = 0.0
    while True:
        t += rng.exponential(1.0 / rate_per_s)
        if t >= duration_s:
            break
        wanted = int(rng.integers(1, max_tasks_per_event + 1))
        free = np.flatnonzero(busy_until <= t)
        rng.shuffle(free)
        for k, agent in enumerate(free[:wanted]):
            trace = by_id[int(rng.choice(trace_ids))]
            arrival = t + k * job_interval_s
            busy_until[agent] = arrival + expected_busy_s(trace, exec_mean_s.get(trace.trace_id, 0.0))
            jobs.append(Job(job_id=len(jobs), arrival_s=round(arrival, 6), agent=int(agent), trace_id=trace.trace_id))
    return Workload(name=name, seed=seed, preset=preset, duration_s=duration_s, agents=agents, jobs=jobs)


def mean_exec_times(traces: TraceSet, robot_types: dict) -> dict[int, float]:
    """Expected execution time of each trace's plan: recorded times, else the exec model's mean.
    robot_types: config robot type name -> object with `skill_set` and `exec_model` names."""
    out = {}
    for trace in traces.traces:
        if trace.exec_times_s:
            out[trace.trace_id] = sum(trace.exec_times_s)
        elif trace.robot_type in robot_types:
            rt = robot_types[trace.robot_type]
            calls = load_skill_set(rt.skill_set).find_calls(trace.plan)
            out[trace.trace_id] = load_exec_model(rt.exec_model).estimate_calls(calls, "mean")
    return out


def compose_preset(
    preset: WorkloadPreset, seed: int, traces: TraceSet | None = None, exec_mean_s: dict[int, float] | None = None
) -> Workload:
    traces = traces or preset_traces(preset)
    return compose(
        traces,
        preset.trace_ids,
        preset.rate_per_s,
        preset.max_tasks_per_event,
        preset.agents,
        preset.duration_s,
        seed,
        preset.job_interval_s,
        exec_mean_s,
        name=f"{preset.name}-seed{seed}",
        preset=preset.name,
    )
