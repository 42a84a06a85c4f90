"""Recorded plans by instruction text, for the `sim` engine in live runs: a live task whose
instruction matches a trace's instruction (after trimming whitespace) replays that trace's
plan; any other instruction is rejected by the planner with a clear reason."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from llm_planner.lrtrace.load import load_traces
from llm_planner.settings.paths import resolve_resource


class PlanBook:
    def __init__(self) -> None:
        self._plans: dict[str, str] = {}
        self._labels: dict[str, str] = {}

    @classmethod
    def from_trace_sets(cls, names_or_paths: Sequence[str | Path]) -> PlanBook:
        book = cls()
        for item in names_or_paths:
            for trace in load_traces(resolve_resource(item, "config/traces")).traces:
                if trace.plan:
                    book.add(trace.instruction, trace.plan, trace.name)
        return book

    def add(self, instruction: str, plan: str, label: str = "") -> None:
        self._plans[instruction.strip()] = plan
        self._labels[instruction.strip()] = label

    def plan_for(self, instruction: str) -> str | None:
        return self._plans.get(instruction.strip())

    def label_for(self, instruction: str) -> str:
        return self._labels.get(instruction.strip(), "")

    def __len__(self) -> int:
        return len(self._plans)
