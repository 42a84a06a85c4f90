"""Skill sets (skills/*.yaml): the calls a robot type can execute, how to recognise them in
generated text (one regex per skill), and the prompt text that teaches them to the LLM."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from llm_planner.catalog.scene import render_task
from llm_planner.domain.calls import SkillCall
from llm_planner.settings.model_file import load_model_file
from llm_planner.settings.paths import resolve_resource

# Placeholders usable in a skill's regex, so skill files stay readable.
REGEX_PLACEHOLDERS = {
    "{num}": r"(?:-?\d+(?:\.\d+)?|_\d+)",  # a number or a MiniSpec variable (_1)
    "{str}": r"""(?:'[^']*'|"[^"]*"|_\d+)""",  # a quoted string or a variable
    "{expr}": r"[^()]*(?:\([^()]*\)[^()]*)*",  # any arguments, one level of nested calls
}


def expand_regex(pattern: str) -> str:
    for key, value in REGEX_PLACEHOLDERS.items():
        pattern = pattern.replace(key, value)
    return pattern


class SkillArg(BaseModel):
    """`object`: a string that names an object or place of the scene (plan checks test it);
    `str`: free text (a message, a question); `expr`: any argument expression."""

    model_config = ConfigDict(extra="forbid")
    name: str
    type: Literal["int", "float", "str", "object", "expr"]
    unit: str | None = None
    # What the robot accepts (int and float arguments); plans outside are not runnable.
    min: int | None = Field(default=None, ge=0)
    max: int | None = Field(default=None, ge=0)

    @model_validator(mode="after")
    def _range(self) -> SkillArg:
        if (self.min is None) != (self.max is None):
            raise ValueError(f"argument {self.name}: give both min and max, or neither")
        if self.min is not None and self.max is not None and (self.type not in ("int", "float") or self.min > self.max):
            raise ValueError(f"argument {self.name}: a range needs an int or float argument and min <= max")
        return self


class Skill(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    abbr: str
    args: list[SkillArg] = []
    description: str
    regex: str
    # query: only reads the world (a position, visibility, the time) and is useful only for
    # its value; a plan of queries alone does nothing for the robot.
    kind: Literal["action", "query"] = "action"
    # searches for its object, which the scene may not list yet: the plan grammar lets it (and
    # a conditional on it) name what the task names
    searches: bool = False
    # the way an action moves the robot, if one way or toward its object (alerts: catalog/hazards.py)
    moves: Literal["forward", "backward", "left", "right", "up", "down", "toward"] | None = None
    # what the skill does with an arm's one-object gripper: grasp, release, or tell whether it
    # holds something (plans that grasp while holding: planning/gripper.py)
    gripper: Literal["grasp", "release", "holding"] | None = None

    @field_validator("regex")
    @classmethod
    def _compiles(cls, value: str) -> str:
        try:
            re.compile(expand_regex(value))
        except re.error as exc:
            raise ValueError(f"regex {value!r} does not compile: {exc}") from None
        return value


class SkillSetFile(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    syntax: Literal["minispec", "python"]
    description: str
    segment_tokens: int = Field(gt=0, description="l_max: expected tokens per segment")
    plan_token_scale: int = Field(
        default=1,
        ge=1,
        description="this syntax's tokens per action against MiniSpec's: the engine's plan token limit "
        "(`vllm.max_plan_tokens`) is multiplied by it",
    )
    system_prompt: str
    examples: list[dict[str, str]] = []
    skills: list[Skill]


@dataclass(eq=False)  # compared and hashed by identity: one object per loaded file
class SkillSet:
    spec: SkillSetFile
    _patterns: list[tuple[str, re.Pattern]] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        abbrs = [s.abbr for s in self.spec.skills]
        if len(set(abbrs)) != len(abbrs):
            raise ValueError(f"skill set {self.name}: abbreviations must be unique")
        # A call must not be the tail of a longer identifier (`xmf(` is not `mf(`).
        self._patterns = [(s.abbr, re.compile(rf"(?<![\w.]){expand_regex(s.regex)}")) for s in self.spec.skills]

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def syntax(self) -> str:
        return self.spec.syntax

    @property
    def segment_tokens(self) -> int:
        return self.spec.segment_tokens

    @property
    def plan_token_scale(self) -> int:
        return self.spec.plan_token_scale

    def skill(self, key: str) -> Skill:
        for s in self.spec.skills:
            if key in (s.abbr, s.name):
                return s
        raise KeyError(f"skill set {self.name} has no skill {key!r}")

    def find_calls(self, text: str) -> list[SkillCall]:
        """Skill calls in `text`, in evaluation order (inner calls before the call using them).
        Text inside string literals is masked first, so `l('mf(50)')` is one call, not two."""
        masked = mask_strings(text)
        calls = [
            SkillCall(abbr, text[m.start() : m.end()], m.start(), m.end())
            for abbr, pattern in self._patterns
            for m in pattern.finditer(masked)
        ]
        calls.sort(key=lambda c: (c.end, c.start))
        return calls

    def parse_call(self, text: str) -> SkillCall:
        """The one skill call that `text` is, whole (e.g. a goal's `calls` entry "mf(50)")."""
        text = text.strip()
        for call in self.find_calls(text):
            if call.start == 0 and call.end == len(text):
                return call
        raise ValueError(f"{text!r} is not a call of a {self.name} skill")

    def _system_text(self) -> str:
        lines = [self.spec.system_prompt.strip(), "", "Skills:"]
        for s in self.spec.skills:
            args = ", ".join(a.name for a in s.args)
            lines.append(f"- {s.abbr}({args}): {s.name}. {s.description}")
        return "\n".join(lines)

    def prompt(self) -> str:
        """System text with the skill list and examples, as one text; shared by every task of
        this skill set (what the sim engine counts as the cached prefix)."""
        lines = [self._system_text()]
        for example in self.spec.examples:
            lines += ["", render_task(example["task"]), f"Plan: {example['plan']}"]
        return "\n".join(lines)

    def tuned_chat_prefix(self) -> tuple[tuple[str, str], ...]:
        """The prompt for a model tuned on this skill set: it knows the skills, so one short
        system turn names the skill set (what the tuning corpus trains on)."""
        return (
            ("system", f"Skill set {self.name} ({self.syntax}): {self.spec.description} Answer with the plan only."),
        )

    def chat_prefix(self) -> tuple[tuple[str, str], ...]:
        """The same prompt as chat turns for a real model: the system text, then each example
        as a user/assistant exchange (few-shot)."""
        turns = [("system", self._system_text())]
        for example in self.spec.examples:
            turns += [("user", render_task(example["task"])), ("assistant", example["plan"])]
        return tuple(turns)


def mask_strings(text: str, filler: str = "\x01") -> str:
    """Replace the contents of '...' and "..." literals by a filler of the same length.
    An unterminated literal is masked to the end."""
    out = list(text)
    quote = None
    escaped = False
    for i, ch in enumerate(text):
        if quote is None:
            if ch in "'\"":
                quote = ch
        elif escaped:
            out[i] = filler
            escaped = False
        elif ch == "\\":
            out[i] = filler
            escaped = True
        elif ch == quote:
            quote = None
        else:
            out[i] = filler
    return "".join(out)


@cache
def _load_cached(path: Path) -> SkillSet:
    return SkillSet(load_model_file(SkillSetFile, path, "skill set"))


def load_skill_set(name_or_path: str | Path) -> SkillSet:
    return _load_cached(resolve_resource(name_or_path, "skills").resolve())
