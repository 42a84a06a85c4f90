"""Does a plan do its task? A plan does the task when it calls every skill the task needs and
names every object it must act on, as listed with the task: `required_skills` (call names,
alternatives written `a|b`, e.g. `tc|tu` for a turn either way) and `required_objects`. Where
the task lists `first_skills` (an error follow-up: what moves the robot away from the hazard or
retries safely), the plan's first statement must also be a plain call of one of them, one the
robot can run at once rather than a block that is sent only once it closes. An arm's plan that
grasps while its gripper holds an object does not do the task: the arm stops at that grasp.

This is a floor, not a proof: a plan that calls the right skills on the right objects can still
do them in a wrong order or with wrong numbers. It catches what the plan check cannot: a plan
that parses and runs but does something else.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from llm_planner.catalog.skills import SkillSet
from llm_planner.catalog.statements import StatementSplitter
from llm_planner.planning.gripper import grasps_while_holding


@dataclass(frozen=True)
class TaskNeeds:
    skills: tuple[str, ...] = ()  # each one call name, or alternatives "a|b"
    objects: tuple[str, ...] = ()
    first: tuple[str, ...] = ()  # call names the plan may open with (none: any opening)

    def __bool__(self) -> bool:
        return bool(self.skills or self.objects or self.first)


@dataclass(frozen=True)
class TaskCheck:
    missing_skills: list[str] = field(default_factory=list)
    missing_objects: list[str] = field(default_factory=list)
    wrong_first: str = ""  # why the opening statement is not one of the task's first skills
    full_grasps: list[str] = field(default_factory=list)  # grasps while the gripper holds an object

    @property
    def does_task(self) -> bool:
        return not self.missing

    @property
    def missing(self) -> list[str]:
        return (
            self.missing_skills
            + self.missing_objects
            + ([self.wrong_first] if self.wrong_first else [])
            + [f"an empty gripper for {call}" for call in self.full_grasps]
        )


def parse_needs(skills: object, objects: object, where: str = "", first: object = None) -> TaskNeeds:
    """The lists as a task file holds them (None: not given)."""

    def strings(value: object, key: str) -> tuple[str, ...]:
        if value is None:
            return ()
        if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
            raise ValueError(f"{where}: '{key}' must be a list of non-empty strings")
        return tuple(v.strip() for v in value)

    return TaskNeeds(
        strings(skills, "required_skills"), strings(objects, "required_objects"), strings(first, "first_skills")
    )


def unknown_skills(skill_set: SkillSet, needs: TaskNeeds) -> list[str]:
    """Required call names the skill set does not have (a task file written for another)."""
    names = {s.abbr for s in skill_set.spec.skills} | {s.name for s in skill_set.spec.skills}
    listed = [alt for need in needs.skills for alt in need.split("|")] + list(needs.first)
    return sorted({alt for alt in listed if alt not in names})


def check_task(skill_set: SkillSet, plan: str, needs: TaskNeeds) -> TaskCheck:
    called = set()
    for call in skill_set.find_calls(plan):
        called.add(call.skill)
        called.add(skill_set.skill(call.skill).name)
    missing_skills = [need for need in needs.skills if not set(need.split("|")) & called]
    quoted = {m.group(2).strip().lower() for m in re.finditer(r"(['\"])(.*?)\1", plan)}
    missing_objects = [obj for obj in needs.objects if obj.strip().lower() not in quoted]
    return TaskCheck(
        missing_skills,
        missing_objects,
        _wrong_first(skill_set, plan, needs.first),
        grasps_while_holding(skill_set, plan),
    )


def _wrong_first(skill_set: SkillSet, plan: str, first: tuple[str, ...]) -> str:
    if not first:
        return ""
    end = "\n" if skill_set.syntax == "python" else ";"
    statements = StatementSplitter(skill_set.syntax).feed(plan.rstrip() + end)
    if not statements:
        return "first: no statement"
    opening = statements[0]
    if re.match(r"(?:\d+\s*\{|\?|for |if |while )", opening):
        return f"first: a block ({opening[:24]}...)"
    calls = sorted(skill_set.find_calls(opening), key=lambda c: c.start)
    if not calls:
        return "first: no call"
    skill = skill_set.skill(calls[0].skill)
    if not {skill.abbr, skill.name} & set(first):
        return f"first: {calls[0].text} (not {'|'.join(first)})"
    return ""
