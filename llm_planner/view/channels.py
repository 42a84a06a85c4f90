"""The live view's channels: their topics, JSON schemas, and the messages built from the
planner's state and its decision trace. No server here (view/live_view.py serves them), so
a recorder or a test can build the same messages."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from llm_planner.domain.decisions import Decision, Iteration
from llm_planner.domain.tasks import TaskState

if TYPE_CHECKING:
    from llm_planner.planning.planner import Planner

PREFIX = "/llm_planner/view"
TASKS, ROBOTS, QUEUE, BATCH, DECISIONS, UTILITY = (f"{PREFIX}/{name}" for name in
                                                   ("tasks", "robots", "queue", "batch", "decisions", "utility"))
QUEUE_SHOWN = 10  # the ready queue's top entries
FINISHED_SHOWN = 20  # the tasks table keeps the latest finished tasks beside the active ones
ACTIVITIES = ("idle", "executing", "sent_not_started", "waiting_for_planner")

_NUMBER = {"type": "number"}
_STRING = {"type": "string"}
_INT = {"type": "integer"}


def _object(properties: dict) -> dict:
    return {"type": "object", "properties": properties, "required": list(properties)}


def _rows(row: dict) -> dict:
    return _object({"t_s": _NUMBER, "rows": {"type": "array", "items": row}})


SCHEMAS: dict[str, dict] = {
    TASKS: _rows(_object({"task_id": _STRING, "robot_id": _STRING, "urgency": _STRING, "state": _STRING,
                          "segments_sent": _INT, "utility": _NUMBER, "max_utility": _NUMBER,
                          "response_s": {"type": ["number", "null"]}, "message": _STRING})),
    ROBOTS: _rows(_object({"robot_id": _STRING, "activity": {"enum": list(ACTIVITIES)}, "task_id": _STRING,
                           "call": _STRING})),
    QUEUE: _rows(_object({"rank": _INT, "task_id": _STRING, "priority": _NUMBER, "beta": _NUMBER,
                          "deadline_in_s": _NUMBER, "gen_time_s": _NUMBER})),
    BATCH: _object({"t_s": _NUMBER, "replica": _INT, "members": {"type": "array", "items": _STRING},
                    "size": _INT, "step_s": _NUMBER, "predicted_s": _NUMBER, "prefill_tokens": _INT,
                    "started": _INT}),
    DECISIONS: _object({"t_s": _NUMBER, "task_id": _STRING, "kind": _STRING, "reason": _STRING,
                        "figures": {"type": "object"}, "text": _STRING}),
    UTILITY: _object({"t_s": _NUMBER, "levels": {"type": "object", "additionalProperties": _object(
        {"utility": _NUMBER, "max_utility": _NUMBER, "percent_of_max": _NUMBER, "tasks": _INT})}}),
}


def decision_message(d: Decision) -> dict:
    figures = " ".join(f"{k}={v}" for k, v in d.figures.items())
    return {"t_s": d.t_s, "task_id": d.task_id, "kind": d.kind.value, "reason": d.reason.value,
            "figures": d.figures, "text": f"{d.task_id} {d.kind.value} ({d.reason.value}) {figures}".rstrip()}


def batch_message(i: Iteration) -> dict:
    return {"t_s": i.t_s, "replica": i.replica, "members": list(i.members), "size": len(i.members),
            "step_s": i.duration_s, "predicted_s": i.predicted_s, "prefill_tokens": i.prefill_tokens,
            "started": i.started}


def _finite(x: float) -> float | None:
    return round(x, 4) if math.isfinite(x) else None


def tasks_message(planner: Planner, now: float) -> dict:
    """The active tasks and the latest finished ones."""
    active = [g.record for g in planner.generations]
    finished = [r for r in planner.records.values() if r.state.terminal][-FINISHED_SHOWN:]
    return {"t_s": now, "rows": [
        {"task_id": r.request.task_id, "robot_id": r.request.robot_id, "urgency": r.request.urgency_name,
         "state": r.state.name.lower(), "segments_sent": len(r.segments), "utility": round(r.utility, 4),
         "max_utility": round(r.max_utility, 4), "response_s": _finite(r.response_time_s),
         "message": r.message} for r in [*active, *finished]]}


def robots_message(planner: Planner, robot_ids: list[str], now: float) -> dict:
    """Each robot: idle (no task), executing a call, sent a segment it has not started, or
    waiting for the planner (its task goes on, and nothing it was sent is left to do)."""
    by_robot = {g.record.request.robot_id: g for g in planner.generations}
    rows = []
    for robot_id in robot_ids:
        gen = by_robot.get(robot_id)
        activity, task_id, call = "idle", "", ""
        if gen is not None:
            task_id = gen.task_id
            running = [s for s in gen.record.segments if not math.isnan(s.started_s) and math.isnan(s.finished_s)]
            if running:
                activity, call = "executing", running[-1].text
            elif gen.robot.outstanding:
                activity = "sent_not_started"
            else:
                activity = "waiting_for_planner"
        rows.append({"robot_id": robot_id, "activity": activity, "task_id": task_id, "call": call})
    return {"t_s": now, "rows": rows}


def queue_message(planner: Planner, now: float) -> dict:
    """The ready queue's top entries in the order the policy takes them."""
    queue = planner.queue
    rows = [{"rank": n, "task_id": e.gen_id, "priority": round(queue.priority(e, now), 4), "beta": e.tuf.beta,
             "deadline_in_s": round(e.deadline_s - now, 4), "gen_time_s": round(e.gen_time_s, 4)}
            for n, e in enumerate(queue.in_order(now)[:QUEUE_SHOWN], 1)]
    return {"t_s": now, "rows": rows}


def utility_message(planner: Planner, now: float) -> dict:
    """Utility so far per urgency level, over every task the planner keeps a record of."""
    levels: dict[str, dict] = {}
    for r in planner.records.values():
        if r.state == TaskState.REJECTED:
            continue
        level = levels.setdefault(r.request.urgency_name, {"utility": 0.0, "max_utility": 0.0, "tasks": 0})
        level["utility"] += r.utility
        level["max_utility"] += r.max_utility
        level["tasks"] += 1
    for level in levels.values():
        most = level["max_utility"]
        level["percent_of_max"] = round(100 * level["utility"] / most, 2) if most else 100.0
        level["utility"], level["max_utility"] = round(level["utility"], 4), round(most, 4)
    return {"t_s": now, "levels": levels}
