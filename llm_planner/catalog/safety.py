"""A robot's safety gate (the fleet file's `safety`): which of its skills a plan may call, the
bounds of their numeric arguments, and which calls wait for an operator's approval.

The gate works twice. The plan grammar is that of the robot's skill set cut to what the gate
allows (`restricted`), so constrained decoding never writes a forbidden call; and every call
is checked again before its segment is sent (`violation`), which also stops what a recorded
plan or an unconstrained engine holds."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from llm_planner.catalog.skills import SkillSet, load_skill_set
from llm_planner.domain.calls import SkillCall
from llm_planner.settings.config import PlannerConfig
from llm_planner.settings.fleet import FleetConfig
from llm_planner.settings.model_file import ConfigError


@dataclass(frozen=True)
class SafetyRules:
    """One robot's gate, by skill abbreviation. `allowed`: None allows every skill."""

    allowed: frozenset[str] | None = None
    bounds: tuple[tuple[str, float, float], ...] = ()  # (skill, lowest, highest) of its numeric arguments
    approve: frozenset[str] = frozenset()
    approval_timeout_s: float = 30.0

    @classmethod
    def of(
        cls,
        skill_set: SkillSet,
        allow: list[str] | None = None,
        forbid: Sequence[str] = (),
        bounds: dict[str, tuple[float, float]] | None = None,
        approve: Sequence[str] = (),
        approval_timeout_s: float = 30.0,
    ) -> SafetyRules:
        """Rules from skill names or abbreviations; ValueError naming one the skill set lacks."""

        def abbr(key: str) -> str:
            try:
                return skill_set.skill(key).abbr
            except KeyError as exc:
                raise ValueError(exc.args[0]) from None

        allowed = {s.abbr for s in skill_set.spec.skills} if allow is None else {abbr(k) for k in allow}
        allowed -= {abbr(k) for k in forbid}
        limits = []
        for key, (low, high) in (bounds or {}).items():
            skill = skill_set.skill(abbr(key))
            if not any(a.type in ("int", "float") for a in skill.args):
                raise ValueError(f"skill {skill.abbr} has no numeric argument to bound")
            if not low <= high:
                raise ValueError(f"bounds of {skill.abbr}: {low} is above {high}")
            limits.append((skill.abbr, float(low), float(high)))
        if not allowed:
            raise ValueError("the safety gate allows no skill at all")
        everything = allow is None and not forbid
        return cls(
            None if everything else frozenset(allowed),
            tuple(sorted(limits)),
            frozenset(abbr(k) for k in approve),
            approval_timeout_s,
        )

    def bound(self, skill: str) -> tuple[float, float] | None:
        return next(((low, high) for abbr, low, high in self.bounds if abbr == skill), None)

    def violation(self, call: SkillCall) -> str | None:
        """Why the gate stops this call, or None."""
        if self.allowed is not None and call.skill not in self.allowed:
            return f"{call.text}: skill {call.skill} is not allowed for this robot"
        limits = self.bound(call.skill)
        if limits is not None and call.number is not None and not limits[0] <= call.number <= limits[1]:
            return f"{call.text}: {call.number:g} is outside {limits[0]:g}..{limits[1]:g}"
        return None

    def needs_approval(self, call: SkillCall) -> bool:
        return call.skill in self.approve


def fleet_rules(fleet: FleetConfig, config: PlannerConfig) -> dict[str, SafetyRules]:
    """Each gated robot's rules, by robot id; ConfigError naming the robot for a bad rule."""
    rules = {}
    for robot in fleet.robots:
        if robot.safety is not None:
            skill_set = load_skill_set(config.robot_type(robot.type).skill_set)
            try:
                rules[robot.id] = SafetyRules.of(skill_set, **robot.safety.model_dump())
            except ValueError as exc:
                raise ConfigError(f"robot {robot.id}: safety: {exc}") from None
    return rules


@lru_cache(maxsize=256)  # one restricted skill set per (skill set, rules): its grammar is cached by identity
def restricted(skill_set: SkillSet, rules: SafetyRules) -> SkillSet:
    """The skill set with only the skills the gate allows, their numeric arguments within its
    bounds: what the robot's plan grammar is made from."""
    skills = []
    for skill in skill_set.spec.skills:
        if rules.allowed is not None and skill.abbr not in rules.allowed:
            continue
        limits = rules.bound(skill.abbr)
        if limits is not None:
            args = [a.model_copy(update=_tightened(a, limits)) if a.type in ("int", "float") else a for a in skill.args]
            skill = skill.model_copy(update={"args": args})
        skills.append(skill)
    return SkillSet(skill_set.spec.model_copy(update={"skills": skills}))


def _tightened(arg, limits: tuple[float, float]) -> dict:
    """The argument's accepted range, narrowed to the gate's bounds (whole numbers; a grammar
    range needs them)."""
    low, high = max(0, math.ceil(limits[0])), math.floor(limits[1])
    if arg.min is not None:
        low = max(low, arg.min)
    if arg.max is not None:
        high = min(high, arg.max)
    return {"min": low, "max": max(low, high)}
