"""Drive an engine directly (no planner) over a set of plan requests: for tests and benchmarks
of the engine itself, e.g. segmented vs unsegmented generation of the same plans."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llm_planner.catalog.skills import load_skill_set
from llm_planner.engine.base import GenerationRequest
from llm_planner.lrtrace.formats import Trace
from llm_planner.planning import prompts
from llm_planner.planning.segmenter import make_segmenter
from llm_planner.settings.config import PlannerConfig


@dataclass
class PlanRun:
    token_ids: list[int]
    text: str
    suspensions: int
    truncated: bool


def plan_request(
    gen_id: str, skill_set_name: str, task: str, max_tokens: int = 96, constrained: bool = True
) -> GenerationRequest:
    """A request as the planner makes it."""
    request = prompts.plan_request(gen_id, load_skill_set(skill_set_name), task, max_tokens=max_tokens)
    return request if constrained else dataclasses.replace(request, grammar=None)


def trace_plan_requests(
    config: PlannerConfig, traces: list[Trace], batch_id: str, max_tokens: int = 96
) -> list[GenerationRequest]:
    """One request per trace's instruction, each with its robot type's skill set; `batch_id`
    keeps the generation ids of repeated batches apart."""
    return [
        plan_request(f"{batch_id}-{t.trace_id}", config.robot_type(t.robot_type).skill_set, t.instruction, max_tokens)
        for t in traces
    ]


def run_plans(
    engine: Any,  # a real engine (or a replica of one): it reads `output_ids`, which only they have
    requests: list[GenerationRequest],
    segmented: bool,
    suspend: bool = True,
    move: bool = False,
    from_text: bool = False,
) -> tuple[dict[str, PlanRun], float]:
    """Generate every request to its end, all in one batch; returns the runs and the wall time.
    Segmented: the segmenter reads every token and, with `suspend`, each generation is
    suspended at every segment boundary and resumed before the next step (a new vLLM request
    with prompt + generated ids): the most resumes a plan can have. `move`: instead of being
    resumed, it is detached and attached again, as a move to another replica is. `from_text`:
    instead, it is released and goes on from its text so far, as one whose engine was lost does."""
    by_id = {r.gen_id: r for r in requests}
    segmenters = {r.gen_id: make_segmenter(load_skill_set(r.prefix_key)) for r in requests}
    texts = {r.gen_id: "" for r in requests}
    suspensions = {r.gen_id: 0 for r in requests}
    tokens = {r.gen_id: 0 for r in requests}
    runs: dict[str, PlanRun] = {}
    suspended: list[str] = []
    started = time.perf_counter()
    for r in requests:
        engine.add(r)
    while engine.running or suspended:
        for gen_id in suspended:
            if from_text:
                engine.release(gen_id)
                engine.attach(engine.continuation_of(by_id[gen_id], texts[gen_id], tokens[gen_id]))
            elif move:
                engine.attach(engine.detach(gen_id))
            else:
                engine.resume(gen_id)
        suspended = []
        for out in engine.step().outputs:
            texts[out.gen_id] += out.text
            tokens[out.gen_id] += 1
            boundary = segmenters[out.gen_id].feed(out.text) if segmented else []
            if out.finished:
                runs[out.gen_id] = PlanRun(
                    engine.output_ids(out.gen_id), texts[out.gen_id], suspensions[out.gen_id], out.truncated
                )
                engine.release(out.gen_id)
            elif boundary and suspend:
                engine.suspend(out.gen_id)
                suspensions[out.gen_id] += 1
                suspended.append(out.gen_id)
    return runs, time.perf_counter() - started


# One task per skill set and kind of plan: what the engine tests and benchmarks generate.
ENGINE_TASKS = [
    ("minispec_drone", "Scene: [door, person, chair]. Turn right 90 degrees, fly 100 cm forward, take a picture."),
    ("minispec_arm", "Scene: [apple, banana, blue bowl]. Put the apple and the banana in the blue bowl."),
    ("python_arm", "Objects: ['bolt', 'bin']. Move to the bolt, take it, move to the bin and drop it."),
    ("minispec_drone", "Scene: [window, lamp, person]. If you can see a person, fly to them and take a photo."),
]


def run_in_child(script: str, *args: str):
    """Run `script` again in a fresh Python process with `args` and `--json FILE`, and return what
    it wrote there: vLLM keeps process-wide state, so each engine setting gets a process of its
    own. If the child fails, print the end of its stderr and exit with its status."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "child.json"
        proc = subprocess.run([sys.executable, script, *args, "--json", str(out)], capture_output=True, text=True)
        if proc.returncode:
            print(proc.stderr[-3000:], file=sys.stderr)
            raise SystemExit(proc.returncode)
        return json.loads(out.read_text())
