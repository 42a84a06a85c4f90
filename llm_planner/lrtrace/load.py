"""Read a trace set or a workload from any supported file: LRTrace's own formats, or the
TimelyLLM artifact's JSON (detected by its shape and converted by the importer)."""

from __future__ import annotations

from pathlib import Path

from llm_planner.lrtrace import importer
from llm_planner.lrtrace.formats import TRACES_FORMAT, WORKLOAD_FORMAT, FormatError, TraceSet, Workload, read_file


def load_traces(path: str | Path) -> TraceSet:
    """LRTrace's trace-set format, or the TimelyLLM artifact's trace-set JSON (detected)."""
    path = Path(path)
    raw = read_file(path)
    if importer.is_artifact_traces(raw):
        return importer.import_traces(raw, name=path.stem)
    if not isinstance(raw, dict) or raw.get("format") != TRACES_FORMAT:
        raise FormatError(
            f"{path}: neither an LRTrace trace set (format: {TRACES_FORMAT}) nor a TimelyLLM artifact trace-set JSON"
        )
    try:
        traces = TraceSet.model_validate(raw)
    except ValueError as exc:
        raise FormatError(f"{path}: {exc}") from None
    traces.by_id()
    return traces


def load_workload(path: str | Path) -> tuple[Workload, TraceSet | None]:
    """LRTrace's workload format, or the TimelyLLM artifact's job list (detected). An artifact job
    list carries each job's task text, so it also yields a partial trace set (no plans)."""
    path = Path(path)
    raw = read_file(path)
    if importer.is_artifact_workload(raw):
        return importer.import_workload(raw, name=path.stem)
    if not isinstance(raw, dict) or raw.get("format") != WORKLOAD_FORMAT:
        raise FormatError(
            f"{path}: neither an LRTrace workload (format: {WORKLOAD_FORMAT}) nor a TimelyLLM artifact workload JSON"
        )
    try:
        return Workload.model_validate(raw), None
    except ValueError as exc:
        raise FormatError(f"{path}: {exc}") from None
