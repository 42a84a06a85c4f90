"""Is a generated plan one a robot can run? The one place that judges a plan's text.

A plan is valid when it parses in its skill set's syntax, calls at least one action skill, ended
before the token limit, reads no variable it never sets, passes numbers within the ranges the
robot accepts (`min`/`max` in the skill set), never grasps while an arm's one-object gripper
holds something (planning/gripper.py), and every argument that names an object (a skill
argument of type `object`) names one of the scene's objects or a word group of the task, where
the task gives a scene. Positions (numbers, expressions) are always accepted.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

from llm_planner.catalog.grammar import check_plan
from llm_planner.catalog.scene import parse_task_text
from llm_planner.catalog.skills import SkillSet, mask_strings
from llm_planner.planning.gripper import grasps_while_holding
from llm_planner.planning.segmenter import split_segments


@dataclass
class PlanCheck:
    calls: list[str]
    segments: list[str]  # statements sent together, as the planner would segment the plan
    truncated: bool
    problems: list[str] = field(default_factory=list)

    @property
    def valid(self) -> bool:
        return not self.problems

    @property
    def repeated_statements(self) -> int:
        return repeated_statements(self.segments)


def repeated_statements(segments: list[str]) -> int:
    """Segments whose text (whitespace aside) equals an earlier one's."""
    seen: set[str] = set()
    repeats = 0
    for text in segments:
        key = "".join(text.split())
        repeats += key in seen
        seen.add(key)
    return repeats


def check_generated_plan(skill_set: SkillSet, task_text: str, plan: str, truncated: bool = False) -> PlanCheck:
    segments = split_segments(skill_set, plan)
    calls = skill_set.find_calls(plan)
    result = PlanCheck([c.text for c in calls], [s.text for s in segments if s.text.strip()], truncated)
    if truncated:
        result.problems.append("cut at the token limit")
    syntax_problem = check_plan(skill_set, plan)
    if syntax_problem:
        result.problems.append(syntax_problem)
    if not calls:
        result.problems.append("holds no skill call")
    elif all(skill_set.skill(c.skill).kind == "query" for c in calls):
        result.problems.append("calls no action, only queries")
    out_of_range = [c.text for c in calls if _out_of_range(skill_set, c.skill, c.text)]
    if out_of_range:
        result.problems.append("arguments outside what the robot accepts: " + ", ".join(out_of_range))
    tree = _python_tree(plan) if skill_set.syntax == "python" else None
    unset = _unset_variables(skill_set, plan, tree)
    if unset:
        result.problems.append("reads variables nothing sets: " + ", ".join(unset))
    held = grasps_while_holding(skill_set, plan, tree)
    if held:
        result.problems.append("grasps while the gripper holds an object: " + ", ".join(held))
    task = parse_task_text(task_text)
    if task.objects:
        bound = _python_string_bindings(tree) if tree is not None else {}
        unknown = []
        for call in calls:
            for name in _object_arguments(skill_set, call.skill, call.text, bound):
                if not task.names_object(name) and name not in unknown:
                    unknown.append(name)
        if unknown:
            result.problems.append("names what the scene and task do not: " + ", ".join(repr(n) for n in unknown))
    return result


def _out_of_range(skill_set: SkillSet, abbr: str, call_text: str) -> bool:
    for spec, arg in zip(skill_set.skill(abbr).args, _split_arguments(call_text)):
        if spec.min is None:
            continue
        try:
            value = float(arg)
        except ValueError:
            continue  # a variable or an expression: known only when the robot runs it
        if value < spec.min or (spec.max is not None and value > spec.max):
            return True
    return False


def _python_tree(plan: str) -> ast.Module | None:
    try:
        return ast.parse(plan)
    except SyntaxError:
        return None  # check_plan names the syntax error


def _unset_variables(skill_set: SkillSet, plan: str, tree: ast.Module | None) -> list[str]:
    """Variables the plan reads but never assigns (a robot would fail on them)."""
    if skill_set.syntax == "minispec":
        masked = mask_strings(plan)
        assigned = set(re.findall(r"(_\d+)=(?!=)", masked))
        read = [m.group(1) for m in re.finditer(r"(_\d+)(?!\d)(?!=(?!=))", masked)]
    else:
        if tree is None:
            return []
        names = [n for n in ast.walk(tree) if isinstance(n, ast.Name)]
        assigned = {n.id for n in names if isinstance(n.ctx, ast.Store)}
        assigned |= {s.abbr for s in skill_set.spec.skills} | {"True", "False", "range", "len"}
        read = [n.id for n in names if isinstance(n.ctx, ast.Load)]
    return sorted(set(read) - assigned)


def _object_arguments(skill_set: SkillSet, abbr: str, call_text: str, bound: dict[str, list[str]]) -> list[str]:
    """The object names a call passes: string literals in `object` argument positions, and
    for a Python variable the strings it is bound to (a loop over a list, an assignment)."""
    skill = skill_set.skill(abbr)
    args = _split_arguments(call_text)
    names: list[str] = []
    for spec, arg in zip(skill.args, args):
        if spec.type != "object":
            continue
        arg = arg.strip()
        if len(arg) >= 2 and arg[0] == arg[-1] and arg[0] in "'\"":
            names.append(arg[1:-1])
        else:
            names.extend(bound.get(arg, []))
    return names


def _split_arguments(call_text: str) -> list[str]:
    if "(" not in call_text:
        return []
    inner = call_text[call_text.index("(") + 1 : call_text.rindex(")")]
    args, depth, quote, start = [], 0, None, 0
    for i, ch in enumerate(inner):
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        elif ch == "," and depth == 0:
            args.append(inner[start:i])
            start = i + 1
    tail = inner[start:]
    return args + [tail] if tail.strip() or args else args


def _python_string_bindings(tree: ast.Module) -> dict[str, list[str]]:
    bound: dict[str, list[str]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.For) and isinstance(node.target, ast.Name):
            values = bound.get(node.iter.id, []) if isinstance(node.iter, ast.Name) else _strings(node.iter)
            bound.setdefault(node.target.id, []).extend(values)
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    bound.setdefault(target.id, []).extend(_strings(node.value))
    return bound


def _strings(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, (ast.List, ast.Tuple)):
        return [s for element in node.elts for s in _strings(element)]
    return []
