"""Does a plan do its task? A plan does the task when it calls every skill the task needs and
names every object it must act on, as listed with the task: `required_skills` (call names,
alternatives written `a|b`, e.g. `tc|tu` for a turn either way) and `required_objects`.

This is a floor, not a proof: a plan that calls the right skills on the right objects can still
do them in a wrong order or with wrong numbers. It catches what the plan check cannot: a plan
that parses and runs but does something else.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from llm_planner.catalog.skills import SkillSet


@dataclass(frozen=True)
class TaskNeeds:
    skills: tuple[str, ...] = ()  # each one call name, or alternatives "a|b"
    objects: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.skills or self.objects)


@dataclass(frozen=True)
class TaskCheck:
    missing_skills: list[str] = field(default_factory=list)
    missing_objects: list[str] = field(default_factory=list)

    @property
    def does_task(self) -> bool:
        return not self.missing_skills and not self.missing_objects


def parse_needs(skills: object, objects: object, where: str = "") -> TaskNeeds:
    """The lists as a task file holds them (None: not given)."""
    def strings(value: object, key: str) -> tuple[str, ...]:
        if value is None:
            return ()
        if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
            raise ValueError(f"{where}: '{key}' must be a list of non-empty strings")
        return tuple(v.strip() for v in value)

    return TaskNeeds(strings(skills, "required_skills"), strings(objects, "required_objects"))


def unknown_skills(skill_set: SkillSet, needs: TaskNeeds) -> list[str]:
    """Required call names the skill set does not have (a task file written for another)."""
    names = {s.abbr for s in skill_set.spec.skills} | {s.name for s in skill_set.spec.skills}
    return sorted({alt for need in needs.skills for alt in need.split("|") if alt not in names})


def check_task(skill_set: SkillSet, plan: str, needs: TaskNeeds) -> TaskCheck:
    called = set()
    for call in skill_set.find_calls(plan):
        called.add(call.skill)
        called.add(skill_set.skill(call.skill).name)
    missing_skills = [need for need in needs.skills if not set(need.split("|")) & called]
    quoted = {m.group(2).strip().lower() for m in re.finditer(r"(['\"])(.*?)\1", plan)}
    missing_objects = [obj for obj in needs.objects if obj.strip().lower() not in quoted]
    return TaskCheck(missing_skills, missing_objects)
