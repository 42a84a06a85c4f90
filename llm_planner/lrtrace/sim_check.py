"""How well the `sim` engine stands in for a real one, and a simulation for a live run: the
same workload and plans run both ways, their task timings and utilities side by side."""

from __future__ import annotations

import math
from pathlib import Path

from rich.table import Table

from llm_planner.lrtrace import report
from llm_planner.lrtrace.compare import Comparison, Variant, WorkloadSource
from llm_planner.lrtrace.metrics import by_level
from llm_planner.lrtrace.simulate import planned_units, simulate

TIMINGS = {
    "first token": lambda r: r.first_token_s - r.request.arrival_s,
    "plan generated": lambda r: r.plan_done_s - r.request.arrival_s,
    "first action": lambda r: r.response_time_s,
}
AGREEMENT_KEYS = ("utility_pct_of_max", "response_p50_s", "response_p95_s", "waiting_mean_s", "tasks")


def check_sim(
    comparison: Comparison, runs_of: list[Variant], source: WorkloadSource, profile: Path, out
) -> dict[str, dict]:
    """Re-run each real-engine run in the `sim` engine with the real engine's profile and the
    plans it generated; print how far the simulated task timings are off and both utilities
    side by side (does the simulation pick the same winner?). Returns the simulated metrics
    by run label."""
    setups = {
        v.label: (v.policy, v.config.model_copy(update={"engine": "sim", "engine_profile": str(profile)}))
        for v in runs_of
    }
    simulated_levels: dict[str, dict] = {}
    table = Table(title=f"sim ({profile.stem}) vs real vLLM engine, same plans, per task")
    for col in ("policy", "timing", "real mean s", "sim mean s", "mean |error| s", "mean |error| %"):
        table.add_column(col, justify="left" if col in ("policy", "timing") else "right")
    for label, sims in comparison.runs.items():
        errors: dict[str, list[tuple[float, float]]] = {k: [] for k in TIMINGS}
        sim_runs = []
        policy, sim_config = setups[label]
        for real in sims:
            plans = {r.request.task_id: r.plan for r in real.records}
            simulated = simulate(source.workload(real.seed), source.traces, policy, sim_config, real.seed, plans=plans)
            sim_runs.append(simulated.records)
            by_task = {r.request.task_id: r for r in simulated.records}
            for r in real.records:
                for key, get in TIMINGS.items():
                    a, b = get(r), get(by_task[r.request.task_id])
                    if math.isfinite(a) and math.isfinite(b):
                        errors[key].append((a, b))
        for key, pairs in errors.items():
            if not pairs:
                continue
            real_mean = sum(a for a, _ in pairs) / len(pairs)
            sim_mean = sum(b for _, b in pairs) / len(pairs)
            abs_err = sum(abs(a - b) for a, b in pairs) / len(pairs)
            table.add_row(
                label,
                key,
                f"{real_mean:.3f}",
                f"{sim_mean:.3f}",
                f"{abs_err:.3f}",
                f"{100 * abs_err / real_mean:.1f}" if real_mean > 0 else "-",
            )
        sim_records = [r for run in sim_runs for r in run]
        simulated_levels[label] = by_level(sim_records, planned_units(sim_records, sim_config), sim_runs)
    out.print(table)
    real_levels = {label: comparison.results[label] for label in comparison.runs}
    print_agreement(real_levels, simulated_levels, out)
    return simulated_levels


def print_agreement(real_levels: dict[str, dict], simulated_levels: dict[str, dict], out) -> None:
    agreement = Table(title="utility % of max: real engine vs sim (same plans)")
    levels = [lvl for lvl in report.level_names(real_levels) if lvl != "all"] + ["all"]
    agreement.add_column("policy")
    for level in levels:
        agreement.add_column(f"{level} real", justify="right")
        agreement.add_column(f"{level} sim", justify="right")
    for label in real_levels:
        agreement.add_row(
            label,
            *(
                report._fmt((per.get(level) or {}).get("utility_pct_of_max"))
                for level in levels
                for per in (real_levels[label], simulated_levels[label])
            ),
        )
    out.print(agreement)
    for level in levels:
        best_real, best_sim = best(real_levels, level), best(simulated_levels, level)
        out.print(
            f"{level}: best on the real engine {', '.join(best_real)}; in simulation {', '.join(best_sim)}"
            + (" - they agree" if set(best_real) & set(best_sim) else " - they DISAGREE")
        )


def best(results: dict[str, dict], level: str) -> list[str]:
    """The runs with the highest utility % of max at `level` (all of them when tied)."""
    values = {label: (per.get(level) or {}).get("utility_pct_of_max") for label, per in results.items()}
    top = max((v for v in values.values() if v is not None), default=None)
    return [label for label, v in values.items() if v is not None and v == top]


def live_vs_sim_table(live: dict, sim: dict, policy: str) -> Table:
    """A live replay's metrics against its simulation's, per level."""
    table = Table(title=f"live vs simulated ({policy}, same workload)")
    for col in ("level", "metric", "live", "simulated", "live - sim"):
        table.add_column(col, justify="right" if col not in ("level", "metric") else "left")
    for level in (lvl for lvl, metrics in live.items() if "utility_pct_of_max" in metrics):
        for key in AGREEMENT_KEYS:
            a, b = live[level].get(key), sim.get(level, {}).get(key)
            diff = None if a is None or b is None else round(a - b, 4)
            table.add_row(level, key, *(report._fmt(v) for v in (a, b, diff)))
    return table
