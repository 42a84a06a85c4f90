"""The distinct tasks of any task file, for benchmarks that generate one plan per task:
a trace set (LRTrace's or the TimelyLLM artifact's), the artifact's workload JSON (its jobs
carry their task text), or JSON Lines of `{"robot_type", "robot_system", "task_input"}`
objects (the artifact's field names; `id`, `split`, `kind`, `steps`, `task_plan`, and what a plan
that does the task must hold, `required_skills`, `required_objects` and, for an error follow-up,
`first_skills`, optional).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from llm_planner.lrtrace import importer
from llm_planner.lrtrace.formats import WORKLOAD_FORMAT, FormatError, read_file
from llm_planner.lrtrace.load import load_traces, load_workload
from llm_planner.planning.task_check import TaskNeeds, parse_needs


@dataclass(frozen=True)
class PlanTask:
    task_id: str
    robot_type: str  # one of the planner's robot types
    task_input: str  # scene + instruction, as the planner receives it
    recorded_plan: str | None = None
    split: str = ""  # e.g. tune / heldout
    kind: str = ""
    steps: int | None = None  # actions the text asks for, where known
    needs: TaskNeeds = TaskNeeds()  # what a plan that does the task calls and names, where known


def load_plan_tasks(path: str | Path) -> list[PlanTask]:
    path = Path(path)
    if not path.is_file():
        raise FormatError(f"{path}: no such file")
    tasks = _jsonl_tasks(path) if path.suffix == ".jsonl" else _trace_file_tasks(path)
    distinct: dict[tuple[str, str], PlanTask] = {}
    for task in tasks:
        distinct.setdefault((task.robot_type, task.task_input.strip()), task)
    if not distinct:
        raise FormatError(f"{path}: no tasks")
    return list(distinct.values())


def _trace_file_tasks(path: Path) -> list[PlanTask]:
    raw = read_file(path)
    if importer.is_artifact_workload(raw):
        traces = load_workload(path)[1]
        assert traces is not None  # an artifact's jobs carry their task texts
    elif isinstance(raw, dict) and raw.get("format") == WORKLOAD_FORMAT:
        raise FormatError(f"{path}: an LRTrace workload names its tasks by trace id only; pass its trace set")
    else:
        traces = load_traces(path)
    return [
        PlanTask(f"{traces.name}/{t.trace_id}", t.robot_type, t.instruction, t.plan or None, kind=t.name)
        for t in traces.traces
    ]


def _jsonl_tasks(path: Path) -> list[PlanTask]:
    tasks = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            item = json.loads(line)
        except json.JSONDecodeError as exc:
            raise FormatError(f"{where}: not JSON: {exc.msg}") from None
        if not isinstance(item, dict) or not isinstance(item.get("task_input"), str) or not item["task_input"].strip():
            raise FormatError(f"{where}: each line must be an object with a non-empty 'task_input'")
        steps = item.get("steps")
        if steps is not None and (not isinstance(steps, int) or steps < 0):
            raise FormatError(f"{where}: 'steps' must be a whole number >= 0")
        plan = item.get("task_plan")
        try:
            needs = parse_needs(
                item.get("required_skills"), item.get("required_objects"), where, item.get("first_skills")
            )
        except ValueError as exc:
            raise FormatError(str(exc)) from None
        tasks.append(
            PlanTask(
                task_id=str(item.get("id", f"{path.stem}/{number}")),
                robot_type=importer.map_robot_type(item.get("robot_type"), item.get("robot_system"), plan or ""),
                task_input=item["task_input"],
                recorded_plan=plan or None,
                split=str(item.get("split", "")),
                kind=str(item.get("kind", "")),
                steps=steps,
                needs=needs,
            )
        )
    return tasks
