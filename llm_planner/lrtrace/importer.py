"""Import the TimelyLLM artifact's JSON (its workload and trace-set files, CC BY 4.0).

Workload: a list of jobs `{"job_id", "trigger time", "agent_id", ["robot_type", "robot_system",]
"trace_id", "task_input", "exe_time_detail": [[skill_token, seconds], ...], "task_exe_time",
"tuf": [beta, ERT, cutoff]}`. Trace set: trace_id -> `{"trace_id", "robot_type",
"robot_system", "task_input", "task_plan", "plan_time", "task_exe_time", "exe_time_detail",
"task_tuf"}` (a list of such objects is accepted too).

The artifact's robot names are mapped to this project's robot types by `map_robot_type`.
A job's measured `exe_time_detail` becomes its `exec_times_s`, used by the simulation in plan
order instead of sampled times.
"""

from __future__ import annotations

import math
from typing import Any

from llm_planner.lrtrace.formats import FormatError, Job, Trace, TraceSet, Workload

URGENT_MAX_ERT_S = 0.5  # an imported TUF with a shorter ERT than this is labelled urgent


def is_artifact_workload(raw: Any) -> bool:
    return isinstance(raw, list) and bool(raw) and isinstance(raw[0], dict) and "trigger time" in raw[0]


def _trace_items(raw: Any) -> list[dict] | None:
    if isinstance(raw, dict) and raw and all(isinstance(v, dict) for v in raw.values()):
        items = list(raw.values())
    elif isinstance(raw, list) and raw and all(isinstance(v, dict) for v in raw):
        items = raw
    else:
        return None
    return items if all("task_plan" in v for v in items) else None


def is_artifact_traces(raw: Any) -> bool:
    return _trace_items(raw) is not None


def map_robot_type(robot_type: str | None, robot_system: str | None, plan: str = "") -> str:
    """The artifact names robots loosely; map them onto config/planner.yaml's robot types."""
    words = f"{robot_type or ''} {robot_system or ''}".lower()
    if any(k in words for k in ("go2", "quadruped", "dog")):
        return "go2"
    if "fltrnn" in words or "python" in words or "move_to(" in plan:
        return "fltrnn_arm"
    if any(k in words for k in ("arm", "indy", "manipulator")) or "pk(" in plan:
        return "indy7"
    return "tello"


def _tuf(value: Any, where: str) -> tuple[float, float, float] | None:
    if value is None:
        return None
    try:
        beta, ert, cutoff = (float(v) for v in value)
    except (TypeError, ValueError):
        raise FormatError(f"{where}: tuf must be [beta, ERT, cutoff], got {value!r}") from None
    return (beta, ert, cutoff)


def _urgency(tuf: tuple[float, float, float] | None) -> str:
    return "urgent" if tuf is not None and tuf[1] < URGENT_MAX_ERT_S else "normal"


def _exec_times(detail: Any, where: str) -> list[float] | None:
    if not detail:
        return None
    out = []
    for item in detail:
        try:
            seconds = float(item[1])
        except (TypeError, ValueError, IndexError):
            raise FormatError(f"{where}: exe_time_detail items must be [skill, seconds], got {item!r}") from None
        if not math.isfinite(seconds) or seconds < 0:
            raise FormatError(f"{where}: execution time {seconds} is not a finite number >= 0")
        out.append(seconds)
    return out


def import_traces(raw: Any, name: str) -> TraceSet:
    items = _trace_items(raw)
    if items is None:
        raise FormatError("not a TimelyLLM artifact trace set")
    traces = []
    for item in items:
        where = f"trace {item.get('trace_id')}"
        try:
            tuf = _tuf(item.get("task_tuf"), where)
            plan = str(item["task_plan"])
            traces.append(
                Trace(
                    trace_id=int(item["trace_id"]),
                    name=f"trace{item['trace_id']}",
                    robot_type=map_robot_type(item.get("robot_type"), item.get("robot_system"), plan),
                    urgency=_urgency(tuf),
                    tuf=tuf,
                    instruction=str(item["task_input"]),
                    plan=plan,
                    plan_time_s=float(item["plan_time"]) if item.get("plan_time") is not None else None,
                    exec_times_s=_exec_times(item.get("exe_time_detail"), where),
                    source="TimelyLLM artifact trace set",
                )
            )
        except KeyError as exc:
            raise FormatError(f"{where}: missing key {exc}") from None
        except ValueError as exc:
            raise FormatError(f"{where}: {exc}") from None
    traces_set = TraceSet(name=name, description="imported from the TimelyLLM artifact", traces=traces)
    traces_set.by_id()
    return traces_set


def import_workload(raw: Any, name: str) -> tuple[Workload, TraceSet]:
    """Jobs, plus the task texts they carry as a plan-less trace set (for live engines)."""
    if not is_artifact_workload(raw):
        raise FormatError("not a TimelyLLM artifact workload (a JSON list of jobs with 'trigger time')")
    jobs, texts = [], {}
    for n, item in enumerate(raw):
        where = f"job {item.get('job_id', n)}"
        try:
            tuf = _tuf(item.get("tuf"), where)
            jobs.append(
                Job(
                    job_id=int(item.get("job_id", n)),
                    arrival_s=float(item["trigger time"]),
                    agent=int(item["agent_id"]),
                    trace_id=int(item["trace_id"]),
                    tuf=tuf,
                    exec_times_s=_exec_times(item.get("exe_time_detail"), where),
                )
            )
        except KeyError as exc:
            raise FormatError(f"{where}: missing key {exc}") from None
        except ValueError as exc:
            raise FormatError(f"{where}: {exc}") from None
        trace_id = int(item["trace_id"])
        if trace_id not in texts and item.get("task_input"):
            texts[trace_id] = Trace(
                trace_id=trace_id,
                name=f"trace{trace_id}",
                robot_type=map_robot_type(item.get("robot_type"), item.get("robot_system")),
                urgency=_urgency(tuf),
                tuf=tuf,
                instruction=str(item["task_input"]),
                plan="",
                source="task text from a TimelyLLM artifact workload (no recorded plan)",
            )
    jobs.sort(key=lambda j: (j.arrival_s, j.job_id))
    ids = [j.job_id for j in jobs]
    if len(set(ids)) != len(ids):
        raise FormatError("duplicate job_id in workload")
    duration = max((j.arrival_s for j in jobs), default=0.0) + 1.0
    agents = max((j.agent for j in jobs), default=0) + 1
    workload = Workload(name=name, duration_s=duration, agents=agents, jobs=jobs)
    return workload, TraceSet(name=f"{name}-texts", traces=list(texts.values()))
