"""The live view's channels: their topics, JSON schemas, and the messages built from the
planner's state and its decision trace. No server here (view/live_view.py serves them), so
a recorder or a test can build the same messages."""

from __future__ import annotations

import json
import math
import statistics
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from llm_planner.domain.decisions import Decision, Iteration, Kind, TracedRun
from llm_planner.domain.tasks import TaskRecord

if TYPE_CHECKING:
    from llm_planner.planning.planner import Planner

PREFIX = "/llm_planner/view"
TASKS, ROBOTS, QUEUE, BATCH, DECISIONS, UTILITY = (
    f"{PREFIX}/{name}" for name in ("tasks", "robots", "queue", "batch", "decisions", "utility")
)
QUEUE_SHOWN = 10  # the ready queue's top entries
FINISHED_SHOWN = 20  # the tasks table keeps the latest finished tasks beside the active ones
RESPONSES_KEPT = 100  # a level's response median is over its latest finished tasks
ACTIVITIES = ("idle", "executing", "sent_not_started", "waiting_for_planner")

_NUMBER = {"type": "number"}
_STRING = {"type": "string"}
_INT = {"type": "integer"}


def _object(properties: dict) -> dict:
    return {"type": "object", "properties": properties, "required": list(properties)}


def _rows(row: dict) -> dict:
    return _object({"t_s": _NUMBER, "rows": {"type": "array", "items": row}})


SCHEMAS: dict[str, dict] = {
    TASKS: _rows(
        _object(
            {
                "task_id": _STRING,
                "robot_id": _STRING,
                "urgency": _STRING,
                "state": _STRING,
                "segments_sent": _INT,
                "utility": _NUMBER,
                "max_utility": _NUMBER,
                "response_s": {"type": ["number", "null"]},
                "message": _STRING,
            }
        )
    ),
    ROBOTS: _rows(
        _object({"robot_id": _STRING, "activity": {"enum": list(ACTIVITIES)}, "task_id": _STRING, "call": _STRING})
    ),
    QUEUE: _rows(
        _object(
            {
                "rank": _INT,
                "task_id": _STRING,
                "priority": _NUMBER,
                "beta": _NUMBER,
                "deadline_in_s": _NUMBER,
                "gen_time_s": _NUMBER,
            }
        )
    ),
    BATCH: _object(
        {
            "t_s": _NUMBER,
            "replica": _INT,
            "members": {"type": "array", "items": _STRING},
            "size": _INT,
            "step_s": _NUMBER,
            "predicted_s": _NUMBER,
            "prefill_tokens": _INT,
            "started": _INT,
        }
    ),
    # The fields of Foxglove's well-known foxglove.Log (its Log panel lists the decisions), then the
    # decision's own.
    DECISIONS: _object(
        {
            "timestamp": _object({"sec": _INT, "nsec": _INT}),
            "level": _INT,
            "message": _STRING,
            "name": _STRING,
            "file": _STRING,
            "line": _INT,
            "t_s": _NUMBER,
            "task_id": _STRING,
            "kind": _STRING,
            "reason": _STRING,
            "figures": {"type": "object"},
        }
    ),
    UTILITY: _object(
        {
            "t_s": _NUMBER,
            "levels": {
                "type": "object",
                "additionalProperties": _object(
                    {
                        "utility": _NUMBER,
                        "max_utility": _NUMBER,
                        "percent_of_max": _NUMBER,
                        "tasks": _INT,
                        "response_p50_s": {"type": ["number", "null"]},
                    }
                ),
            },
        }
    ),
}
SCHEMA_NAMES = {
    topic: "foxglove.Log" if topic == DECISIONS else f"llm_planner.view.{topic.rsplit('/', 1)[1]}" for topic in SCHEMAS
}
_LOG_INFO, _LOG_WARNING = 2, 3  # foxglove.Log levels
_WAITS = (Kind.DEFERRED, Kind.SUSPENDED, Kind.HELD, Kind.LOST_UTILITY)


def decision_message(d: Decision, stamp_ns: int) -> dict:
    """A decision as a log line (a wait or a loss as a warning) with its fields."""
    figures = " ".join(f"{k}={v}" for k, v in d.figures.items())
    sec, nsec = divmod(stamp_ns, 1_000_000_000)
    return {
        "timestamp": {"sec": sec, "nsec": nsec},
        "level": _LOG_WARNING if d.kind in _WAITS else _LOG_INFO,
        "message": f"{d.task_id} {d.kind.value} ({d.reason.value}) {figures}".rstrip(),
        "name": d.task_id,
        "file": "",
        "line": 0,
        "t_s": d.t_s,
        "task_id": d.task_id,
        "kind": d.kind.value,
        "reason": d.reason.value,
        "figures": d.figures,
    }


def batch_message(i: Iteration) -> dict:
    return {
        "t_s": i.t_s,
        "replica": i.replica,
        "members": list(i.members),
        "size": len(i.members),
        "step_s": i.duration_s,
        "predicted_s": i.predicted_s,
        "prefill_tokens": i.prefill_tokens,
        "started": i.started,
    }


def iteration_of(message: dict) -> Iteration:
    """The engine iteration a batch message tells of."""
    return Iteration(
        message["t_s"],
        message["replica"],
        message["step_s"],
        message["predicted_s"],
        tuple(message["members"]),
        message["prefill_tokens"],
        message["started"],
    )


def read_view_recording(path: str | Path) -> TracedRun:
    """The decisions and iterations in an MCAP file holding the live view's channels."""
    from mcap.reader import make_reader

    run = TracedRun()
    with open(path, "rb") as f:
        for _, channel, message in make_reader(f).iter_messages(topics=[DECISIONS, BATCH]):
            data = json.loads(message.data)
            if channel.topic == DECISIONS:
                run.decisions.append(Decision.from_json(data))
            else:
                run.iterations.append(iteration_of(data))
    return run


def _finite(x: float) -> float | None:
    return round(x, 4) if math.isfinite(x) else None


def tasks_message(planner: Planner, finished: Iterable[TaskRecord], now: float) -> dict:
    """The active tasks and the latest finished ones."""
    active = [g.record for g in planner.generations]
    return {
        "t_s": now,
        "rows": [
            {
                "task_id": r.request.task_id,
                "robot_id": r.request.robot_id,
                "urgency": r.request.urgency_name,
                "state": r.state.name.lower(),
                "segments_sent": len(r.segments),
                "utility": round(r.utility, 4),
                "max_utility": round(r.max_utility, 4),
                "response_s": _finite(r.response_time_s),
                "message": r.message,
            }
            for r in [*active, *finished]
        ],
    }


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
    rows = [
        {
            "rank": n,
            "task_id": e.gen_id,
            "priority": round(queue.priority(e, now), 4),
            "beta": e.tuf.beta,
            "deadline_in_s": round(e.deadline_s - now, 4),
            "gen_time_s": round(e.gen_time_s, 4),
        }
        for n, e in enumerate(queue.in_order(now)[:QUEUE_SHOWN], 1)
    ]
    return {"t_s": now, "rows": rows}


@dataclass
class LevelTotals:
    """One urgency level's finished tasks: their utility, its maximum, and the latest responses."""

    utility: float = 0.0
    max_utility: float = 0.0
    tasks: int = 0
    responses: deque[float] = field(default_factory=lambda: deque(maxlen=RESPONSES_KEPT))

    def add(self, record: TaskRecord) -> None:
        self.utility += record.utility
        self.max_utility += record.max_utility
        self.tasks += 1
        if math.isfinite(record.response_time_s):
            self.responses.append(record.response_time_s)


def utility_message(planner: Planner, finished: dict[str, LevelTotals], now: float) -> dict:
    """Utility so far per urgency level (the finished tasks' totals and the active tasks'
    utility), and the median response of the level's latest finished tasks."""
    levels: dict[str, dict] = {}
    for name, totals in finished.items():
        levels[name] = {
            "utility": totals.utility,
            "max_utility": totals.max_utility,
            "tasks": totals.tasks,
            "response_p50_s": round(statistics.median(totals.responses), 4) if totals.responses else None,
        }
    for gen in planner.generations:
        r = gen.record
        level = levels.setdefault(
            r.request.urgency_name, {"utility": 0.0, "max_utility": 0.0, "tasks": 0, "response_p50_s": None}
        )
        level["utility"] += r.utility
        level["max_utility"] += r.max_utility
        level["tasks"] += 1
    for level in levels.values():
        most = level["max_utility"]
        level["percent_of_max"] = round(100 * level["utility"] / most, 2) if most else 100.0
        level["utility"], level["max_utility"] = round(level["utility"], 4), round(most, 4)
    return {"t_s": now, "levels": levels}
