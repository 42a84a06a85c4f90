"""Tables (rich) and plots (matplotlib) for simulated or recorded runs."""

from __future__ import annotations

import math
import statistics
from pathlib import Path

from rich.console import Console
from rich.table import Table

from llm_planner.domain.tasks import TaskRecord
from llm_planner.lrtrace.metrics import METRIC_KEYS, PLAN_KEYS

_HEADERS = {
    "utility_mean": "utility (mean)",
    "utility_pct_of_max": "% of max",
    "response_p50_s": "response p50 s",
    "response_p95_s": "response p95 s",
    "plan_done_p50_s": "plan done p50 s",
    "plans_per_min": "plans / min",
    "completion_p50_s": "done p50 s",
    "waiting_mean_s": "waiting mean s",
    "tasks": "tasks",
}


def _fmt(value) -> str:
    if value is None:
        return "-"
    if isinstance(value, int):
        return str(value)
    return f"{value:.3f}" if abs(value) < 10 else f"{value:.1f}"


def level_names(results: dict[str, dict[str, dict]]) -> list[str]:
    """The urgency levels of the results ("all" last); other keys (e.g. "plans") are not levels."""
    levels: list[str] = []
    for per_level in results.values():
        for level, metrics in per_level.items():
            if level not in levels and "utility_pct_of_max" in metrics:
                levels.append(level)
    return levels


def comparison_tables(results: dict[str, dict[str, dict]], title: str = "") -> list[Table]:
    """One table per urgency level (rows: policies); `results` is the --json structure."""
    levels = level_names(results)
    levels.sort(key=lambda lvl: (lvl == "all", lvl))
    tables = []
    for level in levels:
        table = Table(title=f"{title} - {level} tasks" if title else f"{level} tasks")
        table.add_column("policy")
        for key in METRIC_KEYS:
            table.add_column(_HEADERS[key], justify="right")
        for policy, per_level in results.items():
            if level in per_level:
                table.add_row(policy, *(_fmt(per_level[level][k]) for k in METRIC_KEYS))
        tables.append(table)
    return tables


def markdown_tables(results: dict[str, dict[str, dict]]) -> str:
    """The same tables as Markdown (for README/docs)."""
    levels = sorted(level_names(results), key=lambda lvl: (lvl == "all", lvl))
    out = []
    for level in levels:
        out.append(f"**{level}**\n")
        out.append("| policy | " + " | ".join(_HEADERS[k] for k in METRIC_KEYS) + " |")
        out.append("|---" * (len(METRIC_KEYS) + 1) + "|")
        for policy, per_level in results.items():
            if level in per_level:
                out.append(f"| {policy} | " + " | ".join(_fmt(per_level[level][k]) for k in METRIC_KEYS) + " |")
        out.append("")
    return "\n".join(out)


def plan_table(plans: dict[str, dict], title: str = "") -> Table:
    """Rows: the plans each run executed (and the recorded ones), by PLAN_KEYS."""
    table = Table(title=title or "plans behind the figures")
    table.add_column("plans of")
    for key in PLAN_KEYS:
        table.add_column(key.replace("_", " "), justify="right")
    for name, stats in plans.items():
        table.add_row(name, *(_fmt(stats[k]) for k in PLAN_KEYS))
    return table


def differences_table(rows: list[dict], title: str, n: int = 8) -> Table:
    """The tasks whose live response exceeds the simulated one most (metrics.task_differences),
    and where the lag of all tasks arose: before the first segment was sent (queueing and
    generation) or after (transport and the robot's start)."""
    before = [r["first_sent_live_s"] - r["first_sent_sim_s"] for r in rows]
    after = [r["difference_s"] - b for r, b in zip(rows, before)]
    busier = sum(r["robot_busy_live_s"] > r["robot_busy_sim_s"] + 0.1 for r in rows)
    caption = (
        (
            f"{len(rows)} tasks: live - sim median {_fmt(_median([r['difference_s'] for r in rows]))} s, of it "
            f"before the first segment was sent {_fmt(_median(before))} s, after it {_fmt(_median(after))} s; "
            f"{busier} found their robot busy longer than simulated"
        )
        if rows
        else "no task in both runs"
    )
    table = Table(title=title, caption=caption)
    for col in (
        "task",
        "robot",
        "level",
        "response live s",
        "sim s",
        "live - sim s",
        "1st segment sent live s",
        "sim s",
        "robot busy at arrival live s",
        "sim s",
    ):
        table.add_column(col, justify="left" if col in ("task", "robot", "level") else "right")
    for r in rows[:n]:
        table.add_row(
            r["task"],
            r["robot"],
            r["level"],
            *(
                _fmt(r[k])
                for k in (
                    "response_live_s",
                    "response_sim_s",
                    "difference_s",
                    "first_sent_live_s",
                    "first_sent_sim_s",
                    "robot_busy_live_s",
                    "robot_busy_sim_s",
                )
            ),
        )
    return table


def recovery_lines(results: dict[str, dict]) -> list[str]:
    """One line per run on the robots' failures and the planner's follow-ups."""
    lines = []
    for label, per_level in results.items():
        r = per_level.get("recovery")
        if r is None:
            continue
        abandoned = ", ".join(f"{n} {why}" for why, n in r["abandoned"].items()) or "none"
        lines.append(
            f"{label:15s} robot failures {r['robot_failures']}: {r['follow_ups']} follow-ups, "
            f"{r['follow_ups_succeeded']} succeeded; failure -> follow-up's first action p50 "
            f"{_fmt(r['recovery_p50_s'])} s, p95 {_fmt(r['recovery_p95_s'])} s; abandoned: {abandoned}"
        )
    return lines


def paired_lines(results: dict[str, dict], over: str = "seeds") -> list[str]:
    """The reference run's utility % of max minus each other run's, seed by seed (`over`:
    what pairs them, "runs" for a live replay's repeats): a header, then per run and level the
    mean gap, its standard error and (smallest..largest) single seed's; below a run whose plans
    differed from the reference's for some tasks, the same over only the tasks with the same plan."""
    paired = {label: per["paired"] for label, per in results.items() if "paired" in per}
    if not paired:
        return []
    first = next(iter(paired.values()))
    seeds = max(g["seeds"] for g in first.values() if _is_gap(g))
    lines = [
        f"{first['reference']} minus each run, utility % of max, mean of {seeds} {over} "
        "± its standard error (smallest..largest):"
    ]
    for label, gaps in paired.items():
        lines.append(f"  {label:22s} " + _gaps(gaps))
        same = gaps.get("same_plans")
        if same is not None:
            lines.append(f"    same plans only ({same['tasks']} of {same['of']} tasks) " + _gaps(same))
    if any("same_plans" in gaps for gaps in paired.values()):
        lines.append(
            "  Some tasks executed other plans in other runs, so these gaps mix plans with schedules; "
            "in bfloat16 a plan can change with its batch (--dtype float32 kept plans equal where measured, "
            "docs/engine.md)"
        )
    return lines


def _gaps(gaps: dict) -> str:
    return "  ".join(f"{level} {_gap(g)}" for level, g in gaps.items() if _is_gap(g))


def _is_gap(g) -> bool:
    """A level's gap in a run's `paired` entry (beside its reference's label and same-plan gaps)."""
    return isinstance(g, dict) and "mean" in g


def _gap(g: dict) -> str:
    error = "" if g.get("sem") is None else f" ±{g['sem']:.1f}"
    return f"{g['mean']:+.1f}{error} ({g['min']:+.1f}..{g['max']:+.1f})"


def _median(values: list[float]) -> float | None:
    finite = [v for v in values if math.isfinite(v)]
    return statistics.median(finite) if finite else None


def print_tables(results: dict[str, dict[str, dict]], title: str = "", console: Console | None = None) -> None:
    console = console or Console()
    for table in comparison_tables(results, title):
        console.print(table)
    plans = {name: per["plans"] for name, per in results.items() if "plans" in per}
    if plans:
        console.print(plan_table(plans))


def plot_utility_by_task(per_label: dict[str, dict[str, dict]], path: Path) -> Path:
    """Grouped bars: % of max utility per task type, one bar per policy."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    policies = list(per_label)
    labels = sorted(
        {lbl for d in per_label.values() for lbl in d},
        key=lambda lbl: (next(d[lbl]["level"] for d in per_label.values() if lbl in d), lbl),
    )
    width = 0.8 / max(1, len(policies))
    fig, ax = plt.subplots(figsize=(max(6, 1.1 * len(labels) + 2), 4))
    for i, policy in enumerate(policies):
        ys = [per_label[policy].get(lbl, {}).get("utility_pct_of_max") or 0 for lbl in labels]
        ax.bar([x + i * width for x in range(len(labels))], ys, width, label=policy)
    ax.set_xticks([x + width * (len(policies) - 1) / 2 for x in range(len(labels))])
    names = [f"{lbl}\n({next(d[lbl]['level'] for d in per_label.values() if lbl in d)})" for lbl in labels]
    ax.set_xticklabels(names, rotation=30, ha="right", fontsize=8)
    ax.set_ylabel("utility, % of maximum")
    ax.set_ylim(0, 118)
    ax.legend(fontsize=8, ncol=min(5, len(policies)), loc="upper center")
    ax.set_title("Utility per task type")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def pick_timeline_tasks(records: list[TaskRecord], n_normal: int = 3) -> list[str]:
    """The urgent task that arrived under the most contention (most tasks in flight), and
    the normal tasks that arrived just before it."""
    ordered = sorted(records, key=lambda r: r.request.arrival_s)

    def in_flight(r: TaskRecord) -> int:
        t = r.request.arrival_s
        return sum(
            1 for o in ordered if o.request.arrival_s <= t < (o.finished_s if math.isfinite(o.finished_s) else t)
        )

    urgent = [r for r in ordered if r.request.urgency_name != "normal"]
    if not urgent:
        return [r.request.task_id for r in ordered[: n_normal + 1]]
    pick = max(urgent, key=in_flight)
    before = [
        r for r in ordered if r.request.urgency_name == "normal" and r.request.arrival_s <= pick.request.arrival_s
    ]
    return [r.request.task_id for r in before[-n_normal:]] + [pick.request.task_id]


def plot_timeline(runs: dict[str, list[TaskRecord]], task_ids: list[str], path: Path) -> Path:
    """Generation vs execution per task (like TimelyLLM Fig. 6), one panel per policy."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(runs), 1, figsize=(10, 1.0 + 0.45 * len(task_ids) * len(runs)), squeeze=False)
    t0 = None
    for records in runs.values():
        by_id = {r.request.task_id: r for r in records}
        starts = [by_id[t].request.arrival_s for t in task_ids if t in by_id]
        if starts:
            t0 = min(starts) if t0 is None else min(t0, min(starts))
    t0 = t0 or 0.0
    for ax, (policy, records) in zip(axes[:, 0], runs.items()):
        by_id = {r.request.task_id: r for r in records}
        for row, task_id in enumerate(task_ids):
            r = by_id.get(task_id)
            if r is None:
                continue
            gen = [(a - t0, max(b - a, 0.004)) for a, b in r.gen_intervals]
            exe = [
                (s.started_s - t0, s.finished_s - s.started_s)
                for s in r.segments
                if math.isfinite(s.started_s) and math.isfinite(s.finished_s) and s.finished_s > s.started_s
            ]
            ax.broken_barh(exe, (row - 0.3, 0.25), facecolors="tab:orange", edgecolors="white", linewidth=0.8)
            ax.broken_barh(gen, (row + 0.05, 0.25), facecolors="tab:blue", edgecolors="white", linewidth=0.5)
            ax.plot([r.request.arrival_s - t0], [row], marker="|", color="black", markersize=12)
        ax.set_yticks(range(len(task_ids)))
        labels = [f"{t} ({by_id[t].request.urgency_name})" if t in by_id else t for t in task_ids]
        ax.set_yticklabels(labels, fontsize=7)
        ax.set_title(policy, fontsize=9, loc="left")
        ax.grid(axis="x", alpha=0.3)
    axes[-1, 0].set_xlabel("seconds since the first chosen task arrived  (blue: generating, orange: executing)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
