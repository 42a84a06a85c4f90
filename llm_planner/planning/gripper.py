"""Does a plan grasp an object while its gripper already holds one?

An arm's gripper holds one object at a time (both arm skill sets say so to the model), so a
plan that grasps again before releasing cannot run as written. The plan is followed statement
by statement with the gripper's state: empty, holding, or unknown (at the start: an error
follow-up may begin with an object in the gripper). A loop runs its body twice when it repeats,
which is enough to see a body that grasps without releasing; a conditional's branches each
start from the state before it (`is_holding()` tells which) and agree afterwards or leave it
unknown. Skills grasp or release by their `gripper` field in the skill set.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping
from dataclasses import dataclass

from llm_planner.catalog.skills import SkillSet, mask_strings
from llm_planner.catalog.statements import StatementSplitter

Holding = bool | None  # None: unknown


@dataclass
class _Loop:
    body: list[_Item]
    repeats: int  # the iterations that matter: at most 2


@dataclass
class _Branch:
    body: list[_Item]
    else_body: list[_Item] | None = None
    holding_if_true: Holding = None  # what the condition says of the gripper


_Calls = list[tuple[str, str]]  # (skill abbr, call text) of one plain statement, in order
_Item = _Loop | _Branch | _Calls


def grasps_while_holding(skill_set: SkillSet, plan: str, tree: ast.Module | None = None) -> list[str]:
    """The grasping calls of `plan` made while the gripper holds an object, in order, each once.
    `tree`: the Python plan already parsed, if it was."""
    effects = {s.abbr: s.gripper for s in skill_set.spec.skills if s.gripper}
    if "grasp" not in effects.values():
        return []
    if skill_set.syntax == "python":
        if tree is None:
            try:
                tree = ast.parse(plan)
            except SyntaxError:
                return []  # the plan check names the syntax error
        items = _python_items(skill_set, plan, tree.body)
    else:
        items = _minispec_items(skill_set, plan)
    found: list[str] = []
    _follow(items, None, effects, found)
    return list(dict.fromkeys(found))


def _follow(items: list[_Item], state: Holding, effects: Mapping[str, str], found: list[str]) -> Holding:
    for item in items:
        if isinstance(item, _Loop):
            for _ in range(item.repeats):
                state = _follow(item.body, state, effects, found)
        elif isinstance(item, _Branch):
            start_true = state if item.holding_if_true is None else item.holding_if_true
            start_false = state if item.holding_if_true is None else not item.holding_if_true
            after_true = _follow(item.body, start_true, effects, found)
            after_false = (
                start_false if item.else_body is None else _follow(item.else_body, start_false, effects, found)
            )
            state = after_true if after_true == after_false else None
        else:
            for skill, text in item:
                effect = effects.get(skill)
                if effect == "grasp":
                    if state is True:
                        found.append(text)
                    state = True
                elif effect == "release":
                    state = False
    return state


def _calls_in(skill_set: SkillSet, text: str) -> _Calls:
    return [(c.skill, c.text) for c in skill_set.find_calls(text)]


# MiniSpec: `N{...}` repeats its body N times, `?cond{...}` runs it when cond holds (a block
# left open at the end of a cut plan: its body is the rest).
_MINISPEC_BLOCK = re.compile(r"(?:(\d+)|\?[^{]*)\{(.*?)\}?", re.DOTALL)


def _minispec_items(skill_set: SkillSet, text: str) -> list[_Item]:
    splitter = StatementSplitter("minispec")
    statements = splitter.feed(text + ";")
    if splitter.unfinished:
        statements.append(splitter.unfinished)
    items: list[_Item] = []
    for statement in statements:
        block = _MINISPEC_BLOCK.fullmatch(mask_strings(statement))
        if block is None:
            items.append(_calls_in(skill_set, statement))
            continue
        body = _minispec_items(skill_set, statement[block.start(2) : block.end(2)])
        items.append(_Loop(body, min(int(block.group(1)), 2)) if block.group(1) else _Branch(body))
    return items


def _python_items(skill_set: SkillSet, plan: str, statements: list[ast.stmt]) -> list[_Item]:
    items: list[_Item] = []
    for node in statements:
        if isinstance(node, ast.For):
            items.append(_Loop(_python_items(skill_set, plan, node.body), _python_repeats(node.iter)))
        elif isinstance(node, ast.If):
            items.append(
                _Branch(
                    _python_items(skill_set, plan, node.body),
                    _python_items(skill_set, plan, node.orelse) if node.orelse else None,
                    _holding_if_true(skill_set, node.test),
                )
            )
        else:
            items.append(_calls_in(skill_set, ast.get_source_segment(plan, node) or ""))
    return items


def _python_repeats(iterable: ast.expr) -> int:
    if isinstance(iterable, (ast.List, ast.Tuple)):
        return min(len(iterable.elts), 2)
    if isinstance(iterable, ast.Call) and iterable.args and isinstance(iterable.args[0], ast.Constant):
        count = iterable.args[0].value
        return min(count, 2) if isinstance(count, int) else 2
    return 2


def _holding_if_true(skill_set: SkillSet, test: ast.expr) -> Holding:
    """`is_holding()` -> True, `not is_holding()` -> False; any other condition says nothing."""
    negated = isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not)
    inner = test.operand if isinstance(test, ast.UnaryOp) and negated else test
    if isinstance(inner, ast.Call) and isinstance(inner.func, ast.Name):
        try:
            skill = skill_set.skill(inner.func.id)
        except KeyError:
            return None
        if skill.gripper == "holding":
            return not negated
    return None
