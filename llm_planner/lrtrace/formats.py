"""LRTrace file formats: trace sets (recorded robot tasks) and workloads (who gets which task
when). Both are YAML or JSON; `lrtrace.load` reads them and the TimelyLLM artifact's JSON.

Trace set (`format: lrtrace.traces/1`):
  name, traces: [{trace_id, name, robot_type, urgency, tuf?: [beta, ert, cutoff],
                  instruction, plan, plan_time_s?, exec_times_s?: [seconds per call], source?}]
Workload (`format: lrtrace.workload/1`):
  name, seed?, duration_s, agents, preset?,
  jobs: [{job_id, arrival_s, agent, trace_id, tuf?: [...], exec_times_s?: [...]}]
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import yaml
from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from llm_planner.domain.names import agent_robot_id, job_task_id
from llm_planner.domain.tuf import Tuf

TRACES_FORMAT = "lrtrace.traces/1"
WORKLOAD_FORMAT = "lrtrace.workload/1"


class FormatError(ValueError):
    pass


def _check_tuf(value):
    if len(value) != 3:
        raise ValueError("tuf must be [beta, ert_s, cutoff_s]")
    Tuf(*value)  # the one TUF validator
    return value


TufTriple = Annotated[tuple[float, float, float], AfterValidator(_check_tuf)]


class Trace(BaseModel):
    model_config = ConfigDict(extra="forbid")
    trace_id: int
    name: str
    robot_type: str
    urgency: str = "normal"
    tuf: TufTriple | None = None
    instruction: str = Field(min_length=1)
    plan: str
    plan_time_s: float | None = None
    exec_times_s: list[float] | None = None
    source: str = ""


class TraceSet(BaseModel):
    model_config = ConfigDict(extra="forbid")
    format: str = TRACES_FORMAT
    name: str
    description: str = ""
    traces: list[Trace]

    def by_id(self) -> dict[int, Trace]:
        out: dict[int, Trace] = {}
        for t in self.traces:
            if t.trace_id in out:
                raise FormatError(f"trace set {self.name}: duplicate trace_id {t.trace_id}")
            out[t.trace_id] = t
        return out


class Job(BaseModel):
    model_config = ConfigDict(extra="forbid")
    job_id: int
    arrival_s: float = Field(ge=0)
    agent: int = Field(ge=0)
    trace_id: int
    tuf: TufTriple | None = None
    exec_times_s: list[float] | None = None

    @property
    def task_id(self) -> str:
        return job_task_id(self.job_id)

    @property
    def robot_id(self) -> str:
        return agent_robot_id(self.agent)


class Workload(BaseModel):
    model_config = ConfigDict(extra="forbid")
    format: str = WORKLOAD_FORMAT
    name: str
    seed: int | None = None
    preset: str | None = None
    duration_s: float = Field(gt=0)
    agents: int = Field(gt=0)
    jobs: list[Job]


def read_file(path: Path):
    text = path.read_text()
    try:
        return json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as exc:
        raise FormatError(f"{path}: not valid {'JSON' if path.suffix == '.json' else 'YAML'}: {exc}") from None


def save(model: BaseModel, path: str | Path) -> None:
    path = Path(path)
    data = model.model_dump(mode="json", exclude_none=True)
    if path.suffix == ".json":
        path.write_text(json.dumps(data, indent=1))
    else:
        path.write_text(yaml.safe_dump(data, sort_keys=False, width=100))
