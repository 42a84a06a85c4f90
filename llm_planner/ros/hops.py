"""Per-hop timestamps along the ROS path of a segment, for `benchmarks/ros_overhead.py`.

Each node marks when a segment passes one of its hops (the task client: published; the
planner node: received, enqueued, decided, sent, acknowledged, reported, result; a robot
server: taken (its executor took the goal request), accepted, started, ended); a task's hops
before its first goal are marked on segment 0. Times are `time.monotonic()`, which on Linux
is one clock for every process of the machine, so marks from separate processes line up.

Off unless `LLM_PLANNER_HOPS_DIR` names a directory: then each node writes its marks there
as JSON Lines when it is destroyed (`<node name>.jsonl`), so a benchmark can read them from
nodes in other processes too."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

ENV = "LLM_PLANNER_HOPS_DIR"


class HopLog:
    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.marks: dict[tuple[str, int], dict[str, float]] = {}

    @classmethod
    def from_env(cls, node_name: str) -> HopLog:
        directory = os.environ.get(ENV)
        return cls(Path(directory) / f"{node_name}.jsonl" if directory else None)

    @property
    def enabled(self) -> bool:
        return self.path is not None

    def mark(self, task_id: str, index: int, hop: str, t: float | None = None) -> None:
        if self.path is not None:
            self.marks.setdefault((task_id, index), {}).setdefault(hop, time.monotonic() if t is None else t)

    def write(self) -> None:
        if self.path is None or not self.marks:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a") as f:
            for (task_id, index), hops in self.marks.items():
                f.write(json.dumps({"task_id": task_id, "index": index, **hops}) + "\n")
        self.marks.clear()


def read_hops(directory: str | Path) -> dict[tuple[str, int], dict[str, float]]:
    """Every node's marks in `directory`, merged per (task, segment)."""
    merged: dict[tuple[str, int], dict[str, float]] = {}
    for path in sorted(Path(directory).glob("*.jsonl")):
        for line in path.read_text().splitlines():
            row = json.loads(line)
            key = (row.pop("task_id"), row.pop("index"))
            merged.setdefault(key, {}).update(row)
    return merged
