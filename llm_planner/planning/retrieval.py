"""Solved examples for a task: the tuning corpus's tasks nearest to its instruction.

A small model copies what it is shown. Given the corpus's nearest tasks with their plans as
earlier chat turns, it meets an unfamiliar instruction's words beside a plan that handles them.
Nearness is the TF-IDF cosine of the instructions' words and word pairs (every number one
token), within the task's skill set. Only the corpus's tuning split is searched, so its
held-out part stays unseen. The examples go after the skill set's shared prefix, so they add
prefill to each task (`vllm.retrieved_examples`, docs/evaluation/instructions.md).
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np

from llm_planner.catalog.scene import parse_task_text, render_task
from llm_planner.settings.paths import data_path

_WORD = re.compile(r"[a-z]+|\d+(?:\.\d+)?")


def _terms(instruction: str) -> Counter[str]:
    words = ["#" if w[0].isdigit() else w for w in _WORD.findall(instruction.lower())]
    return Counter(words + [f"{a} {b}" for a, b in zip(words, words[1:])])


@dataclass
class _SkillSetIndex:
    turns: list[tuple[str, str]]  # (the task as the model reads it, its plan)
    vocabulary: dict[str, int]
    idf: np.ndarray
    vectors: np.ndarray  # one L2-normalised TF-IDF row per task

    @classmethod
    def build(cls, rows: list[tuple[str, str]]) -> _SkillSetIndex:
        terms = [_terms(parse_task_text(task).instruction) for task, _ in rows]
        in_tasks = Counter(term for t in terms for term in t)
        vocabulary = {term: i for i, term in enumerate(sorted(in_tasks))}
        idf = np.array([math.log((1 + len(rows)) / (1 + in_tasks[t])) + 1 for t in vocabulary], dtype=np.float32)
        vectors = np.zeros((len(rows), len(vocabulary)), dtype=np.float32)
        for row, counts in enumerate(terms):
            for term, n in counts.items():
                vectors[row, vocabulary[term]] = 1 + math.log(n)
        vectors *= idf
        vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
        return cls([(render_task(task), plan) for task, plan in rows], vocabulary, idf, vectors)

    def nearest(self, instruction: str, k: int) -> tuple[tuple[str, str], ...]:
        query = np.zeros(len(self.vocabulary), dtype=np.float32)
        for term, n in _terms(instruction).items():
            column = self.vocabulary.get(term)
            if column is not None:
                query[column] = (1 + math.log(n)) * self.idf[column]
        scores = self.vectors @ query
        # nearest last: the closest example sits right before the task; none that shares no term
        order = [i for i in np.argsort(-scores, kind="stable")[:k] if scores[i] > 0][::-1]
        return tuple(self.turns[i] for i in order)


class ExampleIndex:
    """The corpus's tuning tasks per skill set, searchable by instruction."""

    def __init__(self, rows: list[dict]) -> None:
        by_skill_set: dict[str, list[tuple[str, str]]] = {}
        for row in rows:
            if row.get("split", "tune") == "tune":
                by_skill_set.setdefault(row["skill_set"], []).append((row["task_input"], row["task_plan"]))
        self._indexes = {name: _SkillSetIndex.build(pairs) for name, pairs in by_skill_set.items()}

    @classmethod
    def load(cls, path: str | Path) -> ExampleIndex:
        """A corpus file (JSON lines with skill_set, task_input, task_plan, split); a relative
        path that does not exist here is read from the package's data folder."""
        file = Path(path)
        if not file.is_absolute() and not file.exists():
            file = data_path(str(path))
        if not file.is_file():
            raise FileNotFoundError(f"example corpus {path}: no such file")
        rows = []
        for number, line in enumerate(file.read_text().splitlines(), 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                raise ValueError(f"example corpus {file}:{number}: not JSON ({e.msg})") from None
            missing = [key for key in ("skill_set", "task_input", "task_plan") if key not in row]
            if missing:
                raise ValueError(f"example corpus {file}:{number}: no {', '.join(missing)}")
            rows.append(row)
        return cls(rows)

    @property
    def skill_sets(self) -> list[str]:
        return sorted(self._indexes)

    def nearest(self, skill_set: str, task_text: str, k: int) -> tuple[tuple[str, str], ...]:
        """Up to `k` solved tasks of `skill_set` as (user turn, plan), the nearest last; none
        where the corpus has no task of that skill set."""
        index = self._indexes.get(skill_set)
        if index is None or k <= 0:
            return ()
        return index.nearest(parse_task_text(task_text).instruction, k)


@cache
def example_index(path: str) -> ExampleIndex:
    """One index per corpus file per process."""
    return ExampleIndex.load(path)


def examples_for(skill_set: str, task_text: str, k: int, corpus: str) -> tuple[tuple[str, str], ...]:
    """The `k` nearest solved tasks of `corpus` for a task (none when k is 0)."""
    return example_index(corpus).nearest(skill_set, task_text, k) if k > 0 else ()
