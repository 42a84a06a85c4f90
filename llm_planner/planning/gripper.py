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
from dataclasses import dataclass, field

from llm_planner.catalog.skills import SkillSet, mask_strings

Holding = bool | None  # None: unknown


@dataclass
class _Block:
    body: list[_Item]
    repeats: int = 1  # a loop's iterations that matter (at most 2)
    else_body: list[_Item] | None = None
    conditional: bool = False
    holding_if_true: Holding = None  # what the condition says of the gripper


@dataclass
class _Calls:
    calls: list[tuple[str, str]] = field(default_factory=list)  # (skill abbr, call text), in order


_Item = _Block | _Calls


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
        items = _minispec_items(skill_set, plan, mask_strings(plan), 0, len(plan))
    found: list[str] = []
    _follow(items, None, effects, found)
    return list(dict.fromkeys(found))


def _follow(items: list[_Item], state: Holding, effects: Mapping[str, str], found: list[str]) -> Holding:
    for item in items:
        if isinstance(item, _Calls):
            for skill, text in item.calls:
                effect = effects.get(skill)
                if effect == "grasp":
                    if state is True:
                        found.append(text)
                    state = True
                elif effect == "release":
                    state = False
        elif item.conditional:
            start_true = state if item.holding_if_true is None else item.holding_if_true
            start_false = state if item.holding_if_true is None else not item.holding_if_true
            after_true = _follow(item.body, start_true, effects, found)
            after_false = (
                start_false if item.else_body is None else _follow(item.else_body, start_false, effects, found)
            )
            state = after_true if after_true == after_false else None
        else:
            for _ in range(item.repeats):
                state = _follow(item.body, state, effects, found)
    return state


def _calls_in(skill_set: SkillSet, text: str) -> _Calls:
    return _Calls([(c.skill, c.text) for c in skill_set.find_calls(text)])


# MiniSpec: `N{...}` repeats its body N times, `?cond{...}` runs it when cond holds; statements
# end with ';'. Strings are masked, so braces and ';' inside them do not count.
_BLOCK_START = re.compile(r"\s*(?:(\d+)|\?([^{;]*))\{")


def _minispec_items(skill_set: SkillSet, plan: str, masked: str, start: int, end: int) -> list[_Item]:
    items: list[_Item] = []
    i = start
    while i < end:
        block = _BLOCK_START.match(masked, i, end)
        if block:
            close = _closing_brace(masked, block.end() - 1, end)
            body = _minispec_items(skill_set, plan, masked, block.end(), close)
            if block.group(1) is not None:
                items.append(_Block(body, repeats=min(int(block.group(1)), 2)))
            else:
                items.append(_Block(body, conditional=True))
            i = close + 1
            continue
        stop = masked.find(";", i, end)
        stop = end if stop < 0 else stop
        items.append(_calls_in(skill_set, plan[i:stop]))
        i = stop + 1
    return items


def _closing_brace(masked: str, opening: int, end: int) -> int:
    depth = 0
    for i in range(opening, end):
        depth += {"{": 1, "}": -1}.get(masked[i], 0)
        if depth == 0:
            return i
    return end  # unclosed: the rest of the plan is the body


def _python_items(skill_set: SkillSet, plan: str, statements: list[ast.stmt]) -> list[_Item]:
    items: list[_Item] = []
    for node in statements:
        if isinstance(node, ast.For):
            items.append(_Block(_python_items(skill_set, plan, node.body), repeats=_python_repeats(node.iter)))
        elif isinstance(node, ast.If):
            items.append(
                _Block(
                    _python_items(skill_set, plan, node.body),
                    else_body=_python_items(skill_set, plan, node.orelse) if node.orelse else None,
                    conditional=True,
                    holding_if_true=_holding_if_true(skill_set, node.test),
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
