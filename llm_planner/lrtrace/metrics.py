"""Per-level metrics over finished task records (the `lrtrace compare` / `report` tables)."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable

import numpy as np
from tokenizers import Tokenizer

from llm_planner.catalog.skills import SkillSet
from llm_planner.catalog.tokenizer import count_tokens
from llm_planner.domain.tasks import TaskRecord, TaskState
from llm_planner.planning.plan_check import repeated_statements
from llm_planner.planning.segmenter import split_segments

METRIC_KEYS = (
    "utility_mean",
    "utility_pct_of_max",
    "response_p50_s",
    "response_p95_s",
    "plan_done_p50_s",
    "plans_per_min",
    "completion_p50_s",
    "waiting_mean_s",
    "tasks",
)


def _finite(values: Iterable[float]) -> list[float]:
    return [v for v in values if v is not None and math.isfinite(v)]


def summarize(
    records: list[TaskRecord], expected_units: dict[str, int] | None = None, runs: list[list[TaskRecord]] | None = None
) -> dict[str, float | int | None]:
    """utility_mean: mean task utility (sum of per-segment TUFs); utility_pct_of_max: total
    utility / total maximum (beta per unit); response (arrival -> first action) and waiting
    over tasks that executed; plan_done (arrival -> plan generated; not known from a live
    recording) and completion (arrival -> last action done) over tasks that succeeded;
    plans_per_min: plans generated per minute, from the first arrival to the last plan done
    (`runs`: the same records split by run, where they come from several, each on its own
    clock; default: one run).
    A task that did not finish counts with its planned units in the maximum (expected_units:
    task_id -> units of its plan), so a lost or failed task lowers the percentage."""
    expected_units = expected_units or {}
    utility = [r.utility for r in records]
    max_total = 0.0
    for r in records:
        units = (
            r.units_executed
            if r.state == TaskState.SUCCEEDED
            else max(r.units_executed, expected_units.get(r.request.task_id, 1))
        )
        max_total += units * r.request.tuf.beta
    response = _finite(r.response_time_s for r in records)
    succeeded = [r for r in records if r.state == TaskState.SUCCEEDED]
    plan_done = _finite(r.plan_done_s - r.request.arrival_s for r in succeeded)
    completion = _finite(r.finished_s - r.request.arrival_s for r in succeeded)
    waiting = [r.waiting_time_s for r in records if r.units_executed]

    def q(values: list[float], p: float) -> float | None:
        return round(float(np.percentile(values, p)), 4) if values else None

    return {
        "utility_mean": round(float(np.mean(utility)), 4) if utility else None,
        "utility_pct_of_max": round(100.0 * sum(utility) / max_total, 2) if max_total else None,
        "response_p50_s": q(response, 50),
        "response_p95_s": q(response, 95),
        "plan_done_p50_s": q(plan_done, 50),
        "plans_per_min": plans_per_min(runs if runs is not None else [records]),
        "completion_p50_s": q(completion, 50),
        "waiting_mean_s": round(float(np.mean(waiting)), 4) if waiting else None,
        "tasks": len(records),
    }


def plans_per_min(runs: Iterable[list[TaskRecord]]) -> float | None:
    """Plans generated per minute over runs that each ran on their own clock: all plans over
    the sum of each run's span, from its first arrival to its last plan done."""
    plans, span_s = 0, 0.0
    for records in runs:
        generated = [r.plan_done_s for r in records if math.isfinite(r.plan_done_s)]
        if generated:
            plans += len(generated)
            span_s += max(generated) - min(r.request.arrival_s for r in records)
    return round(60.0 * plans / span_s, 2) if span_s > 0 else None


def original_tasks(records: list[TaskRecord]) -> list[TaskRecord]:
    """The tasks asked for, without the planner's error follow-ups."""
    return [r for r in records if r.request.follow_up is None]


def by_level(
    records: list[TaskRecord], expected_units: dict[str, int] | None = None, runs: list[list[TaskRecord]] | None = None
) -> dict[str, dict]:
    """{level: metrics} for each urgency level present, plus "all". The planner's error
    follow-ups are not counted here (`recovery` reports them): a task its robot failed counts
    with the units it did not execute, so failures show as lost utility. `runs`: the same
    records split by run (seeds), where they come from several (see `summarize`)."""
    records = original_tasks(records)
    runs = [original_tasks(run) for run in runs] if runs is not None else [records]
    groups: dict[str, list[TaskRecord]] = defaultdict(list)
    for r in records:
        groups[r.request.urgency_name].append(r)
    out = {
        level: summarize(rs, expected_units, [[r for r in run if r.request.urgency_name == level] for run in runs])
        for level, rs in sorted(groups.items())
    }
    out["all"] = summarize(records, expected_units, runs)
    return out


def paired_differences(runs: list[dict[str, dict]], reference: list[dict[str, dict]]) -> dict[str, dict]:
    """{level: mean, sem, min, max, seeds} of the reference's utility % of max minus the run's,
    seed by seed (each a `by_level` of one seed's records): each seed is one workload that both
    ran, so the spread says how much of a gap a single run's timing moves (on a real engine,
    iterations vary from run to run), and sem, the mean's standard error (None with one seed),
    how far the mean itself may be from the gap more seeds would show."""
    out = {}
    for level in dict.fromkeys(level for ref in reference for level in ref):
        gaps = [
            ref[level]["utility_pct_of_max"] - run[level]["utility_pct_of_max"]
            for ref, run in zip(reference, runs)
            if ref.get(level, {}).get("utility_pct_of_max") is not None
            and run.get(level, {}).get("utility_pct_of_max") is not None
        ]
        if gaps:
            sem = float(np.std(gaps, ddof=1) / np.sqrt(len(gaps))) if len(gaps) > 1 else None
            out[level] = {
                "mean": round(float(np.mean(gaps)), 2),
                "sem": None if sem is None else round(sem, 2),
                "min": round(min(gaps), 2),
                "max": round(max(gaps), 2),
                "seeds": len(gaps),
            }
    return out


def by_label(records: list[TaskRecord]) -> dict[str, dict[str, float | int | str | None]]:
    """Mean utility and % of max per task type (label); like `by_level`, without the planner's
    error follow-ups (which carry their failed task's label)."""
    groups: dict[str, list[TaskRecord]] = defaultdict(list)
    for r in original_tasks(records):
        groups[r.request.label or r.request.urgency_name].append(r)
    out: dict[str, dict[str, float | int | str | None]] = {}
    for label, rs in sorted(groups.items()):
        m = summarize(rs)
        out[label] = {
            "utility_mean": m["utility_mean"],
            "utility_pct_of_max": m["utility_pct_of_max"],
            "level": rs[0].request.urgency_name,
            "tasks": len(rs),
        }
    return out


def recovery(records: list[TaskRecord]) -> dict:
    """After robots failed calls (planning/replan.py): the failures, the follow-ups and how they
    ended, the time from a failure to its follow-up's first action (the follow-up arrives at
    the failure), and the tasks abandoned, by reason."""
    failed = [r for r in records if r.robot_failure]
    follow_ups = [r for r in records if r.request.follow_up is not None]
    recovery_s = _finite(r.response_time_s for r in follow_ups)
    abandoned: dict[str, int] = defaultdict(int)
    for r in failed:
        if not r.followed_by:
            abandoned[r.message.rpartition("; ")[2]] += 1

    def q(p: float) -> float | None:
        return round(float(np.percentile(recovery_s, p)), 4) if recovery_s else None

    return {
        "robot_failures": len(failed),
        "follow_ups": len(follow_ups),
        "follow_ups_succeeded": sum(r.state == TaskState.SUCCEEDED for r in follow_ups),
        "recovery_p50_s": q(50),
        "recovery_p95_s": q(95),
        "abandoned": dict(sorted(abandoned.items())),
    }


def terminal_counts(records: list[TaskRecord]) -> dict[str, int]:
    counts: dict[str, int] = defaultdict(int)
    for r in records:
        counts[r.state.name] += 1
    return dict(counts)


PLAN_KEYS = ("plans", "tokens_mean", "units_mean", "repeated_statement_fraction")


def plan_stats(plans: Iterable[tuple[SkillSet, str]], tokenizer: Tokenizer) -> dict[str, float | int | None]:
    """What the plans behind a utility figure look like: tokens (of the bundled model's
    tokenizer), utility units (segments with a skill call) and the fraction of statements
    that repeat an earlier one of the same plan."""
    tokens, units, statements, repeats = [], [], 0, 0
    for skill_set, plan in plans:
        if not plan:
            continue
        segments = split_segments(skill_set, plan)
        texts = [s.text for s in segments if s.text.strip()]  # the statements, as plan_check counts them
        tokens.append(count_tokens(tokenizer, plan))
        units.append(sum(1 for s in segments if s.calls))
        statements += len(texts)
        repeats += repeated_statements(texts)
    return {
        "plans": len(tokens),
        "tokens_mean": round(float(np.mean(tokens)), 1) if tokens else None,
        "units_mean": round(float(np.mean(units)), 2) if units else None,
        "repeated_statement_fraction": round(repeats / statements, 3) if statements else None,
    }


def robot_busy_at_arrival(records: list[TaskRecord]) -> dict[str, float]:
    """Per task: how long its robot was still busy with earlier tasks when it arrived (0: free)."""
    by_robot: dict[str, list[TaskRecord]] = defaultdict(list)
    for r in records:
        by_robot[r.request.robot_id].append(r)
    busy: dict[str, float] = {}
    for robot_records in by_robot.values():
        until = -math.inf
        for r in sorted(robot_records, key=lambda r: r.request.arrival_s):
            busy[r.request.task_id] = max(0.0, until - r.request.arrival_s)
            if math.isfinite(r.finished_s):
                until = max(until, r.finished_s)
    return busy


def task_differences(
    live: list[TaskRecord], simulated: list[TaskRecord], live_first_sent_s: dict[str, float] | None = None
) -> list[dict]:
    """The same tasks in a live and a simulated run, largest live - simulated response first,
    each with when its first segment was sent (after arrival: queueing and generation; the
    rest of the response is transport and the robot's start) and how long its robot was still
    busy with earlier tasks when it arrived, in each run. `live_first_sent_s`: task -> first
    segment sent, seconds after arrival, for live records that do not hold their segments."""
    sim_by_id = {r.request.task_id: r for r in simulated}
    busy_live, busy_sim = robot_busy_at_arrival(live), robot_busy_at_arrival(simulated)
    rows = []
    for r in live:
        s = sim_by_id.get(r.request.task_id)
        if s is None or not (math.isfinite(r.response_time_s) and math.isfinite(s.response_time_s)):
            continue
        task_id = r.request.task_id
        sent_live = (live_first_sent_s or {}).get(task_id, first_sent_s(r))
        rows.append(
            {
                "task": task_id,
                "robot": r.request.robot_id,
                "level": r.request.urgency_name,
                "response_live_s": r.response_time_s,
                "response_sim_s": s.response_time_s,
                "difference_s": r.response_time_s - s.response_time_s,
                "first_sent_live_s": sent_live,
                "first_sent_sim_s": first_sent_s(s),
                "robot_busy_live_s": busy_live[task_id],
                "robot_busy_sim_s": busy_sim[task_id],
            }
        )
    return sorted(rows, key=lambda row: -row["difference_s"])


def first_sent_s(record: TaskRecord) -> float:
    """Seconds from the task's arrival to its first segment's dispatch (NaN if none was sent)."""
    return record.segments[0].dispatched_s - record.request.arrival_s if record.segments else math.nan
