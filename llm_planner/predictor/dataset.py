"""Plans generated for training and evaluating the predictor: one JSON object per line with
the task (id, split, robot type, skill set, text) and what the model wrote (tokens, segments,
tokens per segment). Train and test are split by task, never by segment."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path


@dataclass(frozen=True)
class PlanSample:
    task_id: str
    split: str
    robot_type: str
    skill_set: str
    task_input: str
    tokens: int
    segments: int
    segment_tokens: list[int]
    valid: bool


def write_samples(path: str | Path, samples: list[PlanSample]) -> None:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text("".join(json.dumps(asdict(s)) + "\n" for s in samples))


def read_samples(path: str | Path) -> list[PlanSample]:
    samples = []
    for number, line in enumerate(Path(path).read_text().splitlines(), 1):
        if line.strip():
            try:
                samples.append(PlanSample(**json.loads(line)))
            except (ValueError, TypeError) as exc:
                raise ValueError(f"{path}:{number}: not a plan sample ({exc})") from None
    if not samples:
        raise ValueError(f"{path}: no plan samples")
    return samples
