"""The one JSON schema of the regression benchmarks (`make bench` writes out/bench/<name>.json):

    {"benchmark": name, "schema": 1, "command": the command line, "machine": {"cpu", "cpu_class",
     "cores"}, "figures": what it measured, "ratios": the ratios of figures measured side by side
     in the same run, "notes": what the figures mean}

so that results of different machines and runs can be put side by side by a program."""

from __future__ import annotations

import json
import os
import shlex
import sys
from pathlib import Path

SCHEMA = 1
DEFAULT_FOLDER = Path("out") / "bench"


def machine() -> dict:
    from llm_planner.engine.cpu import cpu_info

    info = cpu_info()
    return {"cpu": info.describe(), "cpu_class": info.cpu_class, "cores": os.cpu_count()}


def bench_result(name: str, figures: dict, ratios: dict | None = None, notes: str = "") -> dict:
    return {
        "benchmark": name,
        "schema": SCHEMA,
        "command": shlex.join([Path(sys.argv[0]).as_posix(), *sys.argv[1:]]),
        "machine": machine(),
        "figures": figures,
        "ratios": ratios or {},
        "notes": notes,
    }


def write_bench_result(
    path: str | Path | None, name: str, figures: dict, ratios: dict | None = None, notes: str = ""
) -> Path:
    """Write the result (default: out/bench/<name>.json) and say where."""
    target = Path(path) if path else DEFAULT_FOLDER / f"{name}.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(bench_result(name, figures, ratios, notes), indent=1) + "\n")
    print(f"wrote {target}")
    return target
