"""Execution-time models per robot type (exec_models/*.yaml): how long each skill call takes.

Kinds per skill (v = the call's first numeric argument):
  const      value (+/- jitter when sampled)
  poly       coeffs[0] + coeffs[1] v + coeffs[2] v^2 + ... (+/- jitter when sampled)
  uniform    low .. high
  empirical  one of the recorded samples
`estimate(call, "min" | "mean" | "qNN")` predicts; `sample(call, rng)` draws for simulation.
"""

from __future__ import annotations

import csv
import hashlib
import math
from collections import OrderedDict, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Annotated, Literal

import numpy as np
import yaml
from pydantic import BaseModel, ConfigDict, Field, model_validator

from llm_planner.domain.calls import SkillCall
from llm_planner.settings.model_file import load_model_file
from llm_planner.settings.paths import resolve_resource


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ConstTime(_Model):
    kind: Literal["const"] = "const"
    value: float = Field(ge=0)
    jitter: float = Field(default=0.0, ge=0, lt=1)

    def _base(self, v: float | None) -> float:
        return self.value


class PolyTime(_Model):
    kind: Literal["poly"] = "poly"
    coeffs: list[float] = Field(min_length=1)  # lowest order first
    jitter: float = Field(default=0.0, ge=0, lt=1)
    default_arg: float = 0.0  # used when the argument is a variable, not a number

    def _base(self, v: float | None) -> float:
        x = self.default_arg if v is None else abs(v)
        return max(0.0, sum(c * x**i for i, c in enumerate(self.coeffs)))


class UniformTime(_Model):
    kind: Literal["uniform"] = "uniform"
    low: float = Field(ge=0)
    high: float

    @model_validator(mode="after")
    def _ordered(self) -> UniformTime:
        if self.high < self.low:
            raise ValueError(f"uniform high ({self.high}) < low ({self.low})")
        return self


class EmpiricalTime(_Model):
    kind: Literal["empirical"] = "empirical"
    samples: list[Annotated[float, Field(ge=0)]] = Field(min_length=1)


SkillTimeModel = Annotated[ConstTime | PolyTime | UniformTime | EmpiricalTime, Field(discriminator="kind")]


def _quantile(model: SkillTimeModel, q: float, v: float | None) -> float:
    if isinstance(model, UniformTime):
        return model.low + q * (model.high - model.low)
    if isinstance(model, EmpiricalTime):
        return float(np.quantile(model.samples, q))
    base = model._base(v)
    return base * (1.0 - model.jitter + 2.0 * model.jitter * q)


def _mean(model: SkillTimeModel, v: float | None) -> float:
    if isinstance(model, UniformTime):
        return (model.low + model.high) / 2
    if isinstance(model, EmpiricalTime):
        return float(np.mean(model.samples))
    return model._base(v)


def _sample(model: SkillTimeModel, v: float | None, rng: np.random.Generator) -> float:
    if isinstance(model, UniformTime):
        return float(rng.uniform(model.low, model.high))
    if isinstance(model, EmpiricalTime):
        return float(model.samples[rng.integers(len(model.samples))])
    return model._base(v) * float(rng.uniform(1.0 - model.jitter, 1.0 + model.jitter))


class ExecModelFile(_Model):
    robot_type: str
    skill_set: str
    source: str
    default: SkillTimeModel = ConstTime(value=0.001)
    skills: dict[str, SkillTimeModel]


@dataclass
class ExecModel:
    spec: ExecModelFile

    @property
    def robot_type(self) -> str:
        return self.spec.robot_type

    def model_for(self, skill: str) -> SkillTimeModel:
        return self.spec.skills.get(skill, self.spec.default)

    def estimate(self, call: SkillCall, stat: str = "min") -> float:
        model = self.model_for(call.skill)
        v = call.number
        if stat == "mean":
            return _mean(model, v)
        if stat == "min":
            return _quantile(model, 0.0, v)
        if stat == "max":
            return _quantile(model, 1.0, v)
        if stat.startswith("q"):
            return _quantile(model, float(stat[1:]) / 100.0, v)
        raise ValueError(f"unknown estimate statistic {stat!r} (min, mean, max, qNN)")

    def estimate_calls(self, calls: Iterable[SkillCall], stat: str = "min") -> float:
        return sum(self.estimate(c, stat) for c in calls)

    def sample(self, call: SkillCall, rng: np.random.Generator) -> float:
        return _sample(self.model_for(call.skill), call.number, rng)

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.spec.model_dump(mode="json"), sort_keys=False)


def task_rng(seed: int, task_id: str) -> np.random.Generator:
    """The generator of one task's call times: simulated runs and simulated live robots draw
    a task's calls from it in plan order, so with the same seed they take the same times."""
    digest = hashlib.sha256(f"{seed}/{task_id}".encode()).digest()
    return np.random.default_rng(int.from_bytes(digest[:8], "little"))


class TaskGenerators:
    """Each task's generator (`task_rng` of `seed` and the task id + `salt`), made at its first
    draw and kept for its next ones; with `keep`, only the most recently used tasks' (a robot
    runs one task at a time), else every task's."""

    def __init__(self, seed: int, salt: str = "", keep: int | None = None) -> None:
        self.seed = seed
        self.salt = salt
        self.keep = keep
        self._rngs: OrderedDict[str, np.random.Generator] = OrderedDict()

    def __call__(self, task_id: str) -> np.random.Generator:
        rng = self._rngs.pop(task_id, None) or task_rng(self.seed, task_id + self.salt)
        self._rngs[task_id] = rng
        while self.keep is not None and len(self._rngs) > self.keep:
            self._rngs.popitem(last=False)
        return rng


@cache
def _load_cached(path: Path) -> ExecModel:
    return ExecModel(load_model_file(ExecModelFile, path, "execution-time model"))


def load_exec_model(name_or_path: str | Path) -> ExecModel:
    return _load_cached(resolve_resource(name_or_path, "exec_models").resolve())


@dataclass(frozen=True)
class TimeSample:
    skill: str
    arg: float | None
    seconds: float


def read_samples_csv(path: str | Path, robot_type: str | None = None) -> list[TimeSample]:
    """CSV with a header `skill,arg,seconds` (arg may be empty); with a `robot_type` column
    (as `llm-planner-fleet --exec-samples` writes), only that robot type's rows if given."""
    samples = []
    with open(path, newline="") as fh:
        reader = csv.DictReader(fh)
        missing = {"skill", "seconds"} - set(reader.fieldnames or [])
        if missing:
            raise ValueError(f"{path}: missing columns {sorted(missing)} (need skill,arg,seconds)")
        for line, row in enumerate(reader, start=2):
            if robot_type is not None and row.get("robot_type", robot_type) != robot_type:
                continue
            try:
                seconds = float(row["seconds"])
                arg = float(row["arg"]) if row.get("arg") not in (None, "") else None
            except ValueError as exc:
                raise ValueError(f"{path}:{line}: {exc}") from None
            if not math.isfinite(seconds) or seconds < 0:
                raise ValueError(f"{path}:{line}: seconds must be a finite number >= 0")
            samples.append(TimeSample(row["skill"].strip(), arg, seconds))
    return samples


def write_samples_csv(path: str | Path, samples: Iterable[tuple[str, str, float | None, float]]) -> int:
    """Write (robot_type, skill, arg, seconds) rows; returns the number written."""
    n = 0
    with open(path, "w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["robot_type", "skill", "arg", "seconds"])
        for robot_type, skill, arg, seconds in samples:
            writer.writerow([robot_type, skill, "" if arg is None else arg, f"{seconds:.4f}"])
            n += 1
    return n


def fit_skill(samples: list[TimeSample], degree: int = 1) -> SkillTimeModel:
    """A linear (or `degree`) fit when the argument varies, else the empirical samples."""
    seconds = np.array([s.seconds for s in samples])
    args = [s.arg for s in samples]
    if all(a is not None for a in args) and len(set(args)) > degree and len(samples) >= degree + 2:
        x = np.abs(np.array(args, dtype=float))
        coeffs = np.polynomial.polynomial.polyfit(x, seconds, degree)
        fitted = np.polynomial.polynomial.polyval(x, coeffs)
        rel = np.abs(seconds - fitted) / np.maximum(fitted, 1e-9)
        jitter = float(min(0.9, np.quantile(rel, 0.9)))
        return PolyTime(
            coeffs=[round(float(c), 7) for c in coeffs], jitter=round(jitter, 3), default_arg=float(np.median(x))
        )
    if len(samples) == 1:
        return ConstTime(value=float(seconds[0]))
    return EmpiricalTime(samples=[round(float(s), 4) for s in seconds])


def fit_exec_model(base: ExecModel, samples: list[TimeSample], degree: int = 1) -> ExecModel:
    """Refit the skills that have samples; others keep the base model."""
    by_skill: dict[str, list[TimeSample]] = defaultdict(list)
    for s in samples:
        by_skill[s.skill].append(s)
    skills = dict(base.spec.skills)
    for skill, group in by_skill.items():
        skills[skill] = fit_skill(group, degree)
    spec = base.spec.model_copy(
        update={
            "skills": skills,
            "source": f"{base.spec.source.strip()}\nRefitted from {len(samples)} recorded samples "
            f"({', '.join(sorted(by_skill))}).",
        }
    )
    return ExecModel(spec)
