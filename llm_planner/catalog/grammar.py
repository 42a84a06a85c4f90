"""Plan languages as EBNF grammars (xgrammar's dialect), built from each skill set's skills:
every call is one of the robot's skills with the right number and kind of arguments.

Two grammars per skill set:
- the syntax (`syntax_grammar`): what parses as a plan of that syntax; `check_plan` tests
  recorded and generated plans against it;
- the plan grammar (`plan_grammar`), a subset of it that constrained decoding admits: only
  statements that do something for the robot. Every top-level statement is a call of an action
  skill (a query such as `t()` or `iv('cup')` is only read: compared in a condition, or an
  argument) or a loop/conditional whose body holds only such calls. A plan sets no variables
  but a Python loop's `obj`, which only that loop's body reads, so no statement reads a value
  nothing set. An object is named by a short quoted name (at most three words). A plan has at
  most 16 statements in a row (MiniSpec: and at most four blocks, each of at most 8
  statements), so it always ends. It ends where the model's end of turn is allowed: after any
  complete statement. Repeating a statement over and over is bounded by the constraint's
  repeat guard (catalog/statements.py): a grammar cannot count. An arm's gripper holds one
  object at a time: in a run of top-level statements and in a block's body, a plan grasps
  nothing while it holds what it grasped, and releases nothing it has already released; a
  loop's body does not end holding what it grasped (its second pass would grasp again). A
  Python block's body starts from what the gripper holds before it.
  A task narrows its plan grammar (`TaskScope`): with a scene, an action names one of the
  scene's objects, and a search or a query (in MiniSpec, and a conditional's body on one) may
  also name a word group of the instruction. Of numbered objects of one kind (`cup_1`,
  `cup_2`), those the instruction's place or size words rule out are left out ("the cup on
  the left"; catalog/referents.py). In Python a query that an action's argument reads
  (`move_to(object_x('cup'), ...)`) names a scene object (an action's argument is a query or a
  literal, never another action, with or without a scene). An error follow-up opens with a
  plain action, never a block, and where the alert places a hazard or tells of one close by,
  that action moves neither toward it nor toward any object (catalog/hazards.py). An arm's
  plan stops right after a grasp only where the instruction asks it to hold something ("pick
  up", "grab", "lift", "hand me"; `asks_to_hold`): "Put the cup on the tray" never ends at
  `pk('cup')`.

MiniSpec  statements end with ';' (optional before '}' and after a block), loops `N{...}`
          (N < 100; in the plan grammar 2-9), conditionals `?a==b&c<d{...}`, assignments
          `_1=call`, returns `->value` (syntax only: a plan has no caller to return to). A
          block holds no nested block: a block is sent to the robot only once it closes, so it
          must close soon.
Python    one statement per line, `for`/`if`/`else` blocks one level deep with a four-space body.
Literals are bounded (names, strings, numbers), so a weak model cannot run on inside one.

`check_plan` needs xgrammar, which comes with vLLM.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache, lru_cache

from llm_planner.catalog.hazards import QUOTED_CALL, is_warning, unsafe_first_moves
from llm_planner.catalog.referents import unmeant
from llm_planner.catalog.scene import TaskText, parse_task_text
from llm_planner.catalog.skills import Skill, SkillSet, expand_regex

_COMMON = r"""
int ::= [0-9] | [1-9] [0-9]{1,4}
number ::= "-"? int ("." [0-9]{1,3})?
"""

_MINISPEC = r"""
root ::= stmt+
stmt ::= simple ";" | block ";"?
body ::= (simple ";"){0,7} simple ";"?
block ::= [1-9] [0-9]? "{" body "}" | "?" condition "{" body "}"
simple ::= call | var "=" call | "->" value
condition ::= comparison (("&" | "|") comparison)*
comparison ::= value (("==" | "!=" | ">" | "<") value)?
value ::= call | number | string | var | "True" | "False"
num ::= number | var
str ::= string | var | call
string ::= "'" [^'\n{};]{1,40} "'"
var ::= "_" [1-9]
"""

# `lead` is the first run of statements: any plan may open with a block, an error follow-up's
# opens with a plain action that the robot can run at once (`first`: an action that moves
# neither toward the alert's hazard nor toward an object). Runs of top-level statements
# (`run_*`, `_runs`) and blocks' bodies (`_bodies`) follow the gripper.
_MINISPEC_PLAN = r"""
block ::= [2-9] "{" body "}" | "?" condition "{" cbody "}"
condition ::= comparison (("&" | "|") comparison){0,2}
comparison ::= call (("==" | "!=" | ">" | "<") value)?
value ::= call | number | string | "True" | "False"
num ::= number
str ::= string
string ::= "'" [^'\n{};]{1,40} "'"
obj_c ::= qobj
qobj_c ::= qobj
"""

_PYTHON = r"""
root ::= stmt+
stmt ::= simple "\n" | "for " name " in " iterable ":\n" body | "if " condition ":\n" body ("else:\n" body)?
body ::= ("    " simple "\n")+
simple ::= call | name " = " expr
iterable ::= "range(" int ")" | list | name
condition ::= "not "? expr ((" == " | " != " | " > " | " < " | " in ") expr)?
expr ::= call | number | string | name | list | "True" | "False"
list ::= "[" (expr (", " expr)*)? "]"
string ::= "'" [^'\n]{1,60} "'" | "\"" [^"\n]{1,60} "\""
name ::= [a-z_] [a-z0-9_]{0,15}
"""

# Python plans read one variable, `obj`, and only inside the loop that binds it: call rules
# come in two scopes, top level (no variable) and a loop body (suffix `_l`, `obj` readable).
_PYTHON_PLAN = r"""
condition ::= "not "? call ((" == " | " != " | " > " | " < ") expr)?
expr ::= call | number | string | "True" | "False"
expr_l ::= call_l | number | string | "obj" | "True" | "False"
list ::= "[" obj (", " obj){1,9} "]"
string ::= "'" [^'\n]{1,40} "'" | "\"" [^"\n]{1,40} "\""
obj_l ::= obj | "obj"
qobj_l ::= qobj | "obj"
aexpr ::= located | number | string | "True" | "False"
aexpr_l ::= located_l | number | string | "obj" | "True" | "False"
"""


def _top(syntax: str, alert: bool, grasp_last: bool) -> str:
    """The plan's top: its runs of statements and, in MiniSpec, up to three blocks each with a
    run after it. An alert opens with a plain action (`first_run`); any other plan may open
    with a block. Where the plan may not stop right after a grasp, its last run is an `frun`."""
    ends_empty = not grasp_last
    last = "f" if ends_empty else ""
    if syntax == "python":
        return f"root ::= {last}{'first_run' if alert else 'run1_u_16'}\n"
    lines = []
    for f in ("", "f") if ends_empty else ("",):
        lead = f"{f}first_run" if alert else f'{f}run1_u_16 | block ";"? {f}run_u_15'
        lines += [f"{f}lead ::= {lead}", f'{f}tail ::= block ";"? {f}run_u_15']
    root = "root ::= flead | lead tail{0,2} ftail" if ends_empty else "root ::= lead tail{0,3}"
    return "\n".join([root, *lines]) + "\n"


# A MiniSpec conditional's body (scope `_c`) may act on what its condition searched for.
_SCOPES = {
    ("minispec", False): ("",),
    ("minispec", True): ("", "_c"),
    ("python", False): ("",),
    ("python", True): ("", "_l"),
}

# Objects a plan may name. Without a scene: any short quoted name (at most three words). With one
# (`TaskScope`): an action names one of the scene's objects; a search or a query (`qobj`) may
# also name a word group of the task, which the scene may not list yet, unless an action's
# argument reads the query (`located`).
_ANY_OBJECT = r"""obj ::= "'" word (" " word){0,2} "'"
qobj ::= obj
word ::= [^'"\n (){}\[\];,]{1,16}
"""

# Argument rule per declared type, per syntax; the plan grammars take an object's name as a
# short quoted name (at most three words; in a Python loop also `obj`), never a phrase or a call.
_ARG_RULES = {
    "minispec": {"int": "num", "float": "num", "str": "str", "object": "str", "expr": "value"},
    "python": {"int": "expr", "float": "expr", "str": "expr", "object": "expr", "expr": "expr"},
}
_PLAN_ARG_RULES = {syntax: {**rules, "object": "obj"} for syntax, rules in _ARG_RULES.items()}
# Words that neither begin nor end a name the task gives to an object.
_NOT_NAME_EDGES = frozenset(
    [
        "a",
        "an",
        "the",
        "this",
        "that",
        "these",
        "those",
        "it",
        "its",
        "them",
        "your",
        "their",
        "his",
        "her",
        "to",
        "of",
        "in",
        "on",
        "at",
        "by",
        "for",
        "from",
        "with",
        "into",
        "onto",
        "over",
        "under",
        "and",
        "or",
        "but",
        "then",
        "if",
        "so",
        "as",
        "is",
        "are",
        "be",
        "was",
        "do",
        "does",
        "did",
        "could",
        "would",
        "should",
        "will",
        "please",
        "you",
        "there",
        "here",
        "now",
        "again",
        "some",
        "any",
        "all",
        "each",
        "every",
        "one",
        "not",
        "no",
        "what",
        "where",
        "which",
        "who",
        "how",
        "many",
        "much",
        "very",
        "just",
        "also",
        "first",
        "next",
        "after",
        "before",
        "until",
        "while",
        "than",
        "alert",
    ]
)


def _ebnf_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def int_range(lo: int, hi: int) -> str:
    """EBNF for the whole numbers lo..hi (no leading zeros), digit by digit."""
    alternatives = []
    for width in range(len(str(lo)), len(str(hi)) + 1):
        first, last = max(lo, 10 ** (width - 1) if width > 1 else 0), min(hi, 10**width - 1)
        if first <= last:
            alternatives += _same_width(str(first), str(last))
    return " | ".join(alternatives)


def _same_width(lo: str, hi: str) -> list[str]:
    rest = len(lo) - 1
    if lo == hi:
        return [f'"{lo}"']
    if rest == 0:
        return [f"[{lo}-{hi}]"]
    if lo[0] == hi[0]:
        return [f'"{lo[0]}" ({" | ".join(_same_width(lo[1:], hi[1:]))})']
    out = [f'"{lo[0]}" ({" | ".join(_same_width(lo[1:], "9" * rest))})']
    if int(hi[0]) - int(lo[0]) > 1:
        out.append(f"[{int(lo[0]) + 1}-{int(hi[0]) - 1}]" + " [0-9]" * rest)
    out.append(f'"{hi[0]}" ({" | ".join(_same_width("0" * rest, hi[1:]))})')
    return out


def _range_rule(arg) -> tuple[str, str]:
    """(rule name, definition) for a ranged argument of the plan grammar."""
    name = f"{arg.type}_{arg.min}_{arg.max}"
    if arg.type == "int":
        return name, int_range(arg.min, arg.max)
    below = f'({int_range(arg.min, arg.max - 1)}) ("." [0-9]{{1,2}})?' if arg.max > arg.min else ""
    return name, " | ".join(x for x in (below, f'"{arg.max}"') if x)


def _arg_rule(skill: Skill, arg, syntax: str, plan: bool, scope: str, located: bool = False) -> str:
    if not plan:
        return _ARG_RULES[syntax][arg.type] + scope
    if arg.min is not None:
        return _range_rule(arg)[0]
    rule = _PLAN_ARG_RULES[syntax][arg.type]
    if rule == "obj" and (skill.kind == "query" or skill.searches) and not located:
        rule = "qobj"
    if rule == "expr" and skill.kind == "action":
        # `move_to(object_x('cup'), ...)`: an action goes to what a query locates, so that
        # query names a scene object; only a test (`if object_x('peach') > 0:`) may name more.
        rule = "aexpr"
    if rule == "str" and syntax == "minispec" and skill.kind == "action":
        rule = f"said_{skill.abbr}"  # text, or a query's answer where the skill reads one
    return rule + (scope if rule in ("obj", "qobj", "expr", "aexpr") else "")


def _call_alternative(skill: Skill, syntax: str, plan: bool, scope: str, located: bool = False) -> str:
    separator = ' "," ' if syntax == "minispec" else ' ", " '
    args = separator.join(_arg_rule(skill, a, syntax, plan, scope, located) for a in skill.args)
    if not skill.args:
        # MiniSpec lets a call without arguments drop its parentheses (`tp`); keep them.
        return _ebnf_string(f"{skill.abbr}()")
    return f"{_ebnf_string(skill.abbr + '(')} {args} {_ebnf_string(')')}"


_GRAMMARS = {
    ("minispec", False): _MINISPEC,
    ("minispec", True): _MINISPEC_PLAN,
    ("python", False): _PYTHON,
    ("python", True): _PYTHON_PLAN,
}


@cache  # per loaded skill set (compared by identity) and kind of grammar
def _grammar(
    skill_set: SkillSet, plan: bool, alert: bool = False, unsafe_first: tuple[str, ...] = (), grasp_last: bool = True
) -> str:
    """The grammar's rules; a plan grammar's object rules (`obj`, `qobj`) are left to the caller.
    An alert's plan opens with an action (`first`) that moves none of the `unsafe_first` ways.
    Without `grasp_last` an arm's plan does not stop right after a grasp."""
    syntax, skills = skill_set.syntax, skill_set.spec.skills
    grasp_last = grasp_last or not any(s.gripper == "grasp" for s in skills)  # a drone's grammar stays as it was
    if syntax not in _ARG_RULES:
        raise ValueError(f"no plan grammar for syntax {syntax!r}")
    rules = []
    if plan:  # the robot's accepted ranges of numeric arguments
        ranged = {_range_rule(a) for s in skills for a in s.args if a.min is not None}
        rules += [f"{name} ::= {definition}" for name, definition in sorted(ranged)]
    for scope in _SCOPES[syntax, plan]:
        rules.append(f"call{scope} ::= " + " | ".join(_call_alternative(s, syntax, plan, scope) for s in skills))
        if plan:  # a statement of its own calls an action; a query's value is only read
            acts = [_call_alternative(s, syntax, plan, scope) for s in skills if s.kind == "action"]
            rules.append(f"act{scope} ::= " + " | ".join(acts))
            if syntax == "python":
                queries = [_call_alternative(s, syntax, plan, scope, located=True) for s in skills if s.kind == "query"]
                # A safety gate may leave no query: then an action's argument is a literal.
                rules.append(f"located{scope} ::= " + (" | ".join(queries) or "number"))
    if plan:
        rules += _runs(skill_set, alert, unsafe_first, grasp_last) + _bodies(skill_set)
    if plan and syntax == "minispec":
        rules += [
            _said_rule(skill_set, s) for s in skills if s.kind == "action" and any(a.type == "str" for a in s.args)
        ]
    top = _top(syntax, alert, grasp_last) if plan else ""
    return (top + _GRAMMARS[syntax, plan] + _COMMON).strip() + "\n" + "\n".join(rules) + "\n"


# The gripper holds one object at a time. Top-level runs of statements track what it holds:
# unknown at the start and after a block, held after a grasp, empty after a release. Held, it
# grasps nothing more; empty, it releases nothing. `run_<state>_<n>`: at most n statements from
# that state (`run1_`: at least one), so a plan still has at most 16 statements in a row. A
# plan's last run may have to end other than right after a grasp (`frun_*`, state `g`).
_GRIPPER_STEPS = {  # state -> {what a statement does: the state after it}
    "u": {"other": "u", "grasp": "h", "release": "e"},
    "h": {"other": "h", "release": "e"},
    "e": {"other": "e", "grasp": "h"},
}
_STATEMENT_END = {"minispec": '";"', "python": '"\\n"'}


def _calls_by_effect(skills: list[Skill], syntax: str, scope: str) -> dict[str, str]:
    """The alternatives of the skills' calls per effect on the gripper ("other": none)."""
    by_effect: dict[str, list[str]] = {}
    for s in skills:
        by_effect.setdefault(s.gripper or "other", []).append(_call_alternative(s, syntax, True, scope))
    return {effect: " | ".join(calls) for effect, calls in by_effect.items()}


def _gripper_steps(effects: Iterable[str]) -> dict[str, dict[str, str]]:
    """`_GRIPPER_STEPS` with only the effects that the skill set's actions have."""
    return {state: {e: after for e, after in moves.items() if e in effects} for state, moves in _GRIPPER_STEPS.items()}


def _runs(skill_set: SkillSet, alert: bool, unsafe_first: tuple[str, ...], grasp_last: bool = True) -> list[str]:
    """Rules for the top-level runs, and `first_run`: an alert's run, which opens with an action
    that moves none of the `unsafe_first` ways. Without `grasp_last`, `frun*` and `ffirst_run`
    too: the same runs, but the last statement of a plan's last run grasps nothing."""
    ends_empty = not grasp_last
    syntax, end = skill_set.syntax, _STATEMENT_END[skill_set.syntax]
    actions = [s for s in skill_set.spec.skills if s.kind == "action"]
    acts = _calls_by_effect(actions, syntax, "")
    safe = [s for s in actions if s.moves not in unsafe_first]
    # A safety gate may leave no such action: then the gate's own check is what stops a move.
    firsts = _calls_by_effect(safe, syntax, "") if alert and safe else acts
    steps = _gripper_steps(acts)
    if ends_empty and "grasp" in acts:  # "g": holding what the last statement grasped
        steps = {
            state: {e: "g" if e == "grasp" else after for e, after in moves.items()} for state, moves in steps.items()
        }
        steps["g"] = steps["h"]
    states: set[str] = set()
    reached = {"u"}
    while reached - states:  # the states a run can reach from the start
        states |= reached
        reached = states | {after for state in states for after in steps[state].values()}
    rules = [f"act_{effect} ::= {alternatives}" for effect, alternatives in acts.items()]
    kinds = ["", "f"] if ends_empty else [""]
    if alert:
        rules += [f"first_{e} ::= {calls}" for e, calls in firsts.items()]
        for k in kinds:
            rules.append(
                f"{k}first_run ::= " + " | ".join(f"first_{e} {end} {k}run_{steps['u'][e]}_15" for e in firsts)
            )
    options = {state: [(f"act_{e} {end}", after) for e, after in steps[state].items()] for state in states}
    if syntax == "python":
        for state in states:
            # A block's body starts from the gripper's state; it may grasp or release, so the
            # state after it is unknown.
            entry = "h" if state == "g" else state
            options[state].append((f"block_{entry}", "u"))
    if states == {"u"}:  # no gripper: a plain repetition
        step = " | ".join(step for step, _ in options["u"])
        return rules + [
            f"{k}{rule}"
            for k in kinds
            for rule in (f"run1_u_16 ::= ({step}){{1,16}}", f"run_u_15 ::= ({step}){{0,15}}")
        ]
    for k in kinds:
        for state in sorted(states):
            may_end = not (k and state == "g")
            for n in range(1, 17):
                rest = [
                    f"{step} {k}run_{after}_{n - 1}" if n > 1 else step
                    for step, after in options[state]
                    if n > 1 or not k or after != "g"
                ]
                rules += [
                    f"{k}run1_{state}_{n} ::= " + " | ".join(rest),
                    f"{k}run_{state}_{n} ::= {k}run1_{state}_{n}" + ("?" if may_end else ""),
                ]
    return rules


# A block's body: (rule, call scope, whether it repeats). MiniSpec's loop `body`, conditional
# `cbody`; Python's conditional `body`, counted loop `rbody`, loop over objects `lbody` and
# over one object `obody`.
_BODIES = {
    "minispec": (("body", "", True), ("cbody", "_c", False)),
    "python": (("body", "", False), ("rbody", "", True), ("lbody", "_l", True), ("obody", "_l", False)),
}
_BODY_STATEMENTS = 8


def _bodies(skill_set: SkillSet) -> list[str]:
    """Rules for blocks' bodies: 1-8 actions that follow the gripper from unknown, like a run
    (`_runs`). A repeating body may not end holding (its second pass starts there)."""
    syntax = skill_set.syntax
    actions = [s for s in skill_set.spec.skills if s.kind == "action"]
    rules = []
    for rule, scope, repeats in _BODIES[syntax]:
        by_effect = _calls_by_effect(actions, syntax, scope)
        if set(by_effect) == {"other"}:  # no gripper: any actions
            act = by_effect["other"]
            rules.append(
                f'{rule} ::= ({act}) (";" ({act})){{0,{_BODY_STATEMENTS - 1}}} ";"?'
                if syntax == "minispec"
                else f'{rule} ::= ("    " ({act}) "\\n"){{1,{_BODY_STATEMENTS}}}'
            )
            continue
        rules += [f"{rule}_{effect} ::= {calls}" for effect, calls in by_effect.items()]
        ends = {"u", "e"} if repeats else {"u", "h", "e"}
        # a MiniSpec body's statements are joined by ";", a Python body's are indented lines
        statement, join = ("{}", ' ";" ') if syntax == "minispec" else ('"    " {} "\\n"', " ")
        for state, moves in _gripper_steps(by_effect).items():
            for n in range(1, _BODY_STATEMENTS + 1):
                options = []
                for effect, after in moves.items():
                    line = statement.format(f"{rule}_{effect}")
                    if after in ends:
                        options.append(line)
                    if n > 1:
                        options.append(f"{line}{join}{rule}_{after}_{n - 1}")
                rules.append(f"{rule}_{state}_{n} ::= " + " | ".join(options))
        if syntax == "minispec":
            rules.append(f'{rule} ::= {rule}_u_{_BODY_STATEMENTS} ";"?')
    if syntax == "python":
        rules += _python_blocks(gripper=any(s.gripper for s in actions))
    return rules


def _python_blocks(gripper: bool) -> list[str]:
    """Python's blocks per state of the gripper before them (`block_u`, `block_h`, `block_e`):
    each body starts from that state."""
    rules = []
    for state in ("u", "h", "e") if gripper else ("u",):
        body, obody, lbody, rbody = (
            (f"{rule}_{state}_{_BODY_STATEMENTS}" if gripper else rule) for rule in ("body", "obody", "lbody", "rbody")
        )
        rules += [
            f'block_{state} ::= loop_{state} | "if " condition ":\\n" {body} ("else:\\n" {body})?',
            f'loop_{state} ::= "for obj in [" obj "]:\\n" {obody} | "for obj in " list ":\\n" {lbody}'
            f' | "for i in range(" [2-9] "):\\n" {rbody}',
        ]
    return rules


def _said_rule(skill_set: SkillSet, skill: Skill) -> str:
    """What an action's text argument may be: a string, or the answer of a query whose call its
    regex reads (`l(p('how many cups?'))` where the skill set's `l` accepts it)."""
    pattern = re.compile(expand_regex(skill.regex))
    said = [
        q
        for q in skill_set.spec.skills
        if q.kind == "query" and len(q.args) == 1 and pattern.fullmatch(f"{skill.abbr}({q.abbr}('x'))")
    ]
    answers = [_call_alternative(q, "minispec", True, "") for q in said]
    return f"said_{skill.abbr} ::= " + " | ".join(["string", *answers])


def syntax_grammar(skill_set: SkillSet) -> str:
    """Every plan of the skill set's syntax, as EBNF (root rule `root`)."""
    return _grammar(skill_set, plan=False)


@dataclass(frozen=True)
class TaskScope:
    """What one task lets a plan name and how its plan must open."""

    objects: tuple[str, ...] = ()  # the scene's objects; none: any short name
    task_words: tuple[str, ...] = ()  # word groups of the instruction a search or query may name
    alert: bool = False  # an error follow-up: the plan opens with a plain action
    unsafe_first: tuple[str, ...] = ()  # an alert's: ways its first action must not move (catalog/hazards.py)
    grasp_last: bool = True  # an arm's plan may stop right after a grasp (the task asks it to hold something)

    @classmethod
    def of_task(cls, task_text: str, hazards: bool = True) -> TaskScope:
        """`hazards`: an alert's first action avoids what its account says of its hazard, and a
        warning in plain words that places one is an alert (catalog/hazards.py)."""
        task = parse_task_text(task_text)
        ruled_out = unmeant(task)
        objects = tuple(dict.fromkeys(n for n in task.object_names if _nameable(n) and n not in ruled_out))
        alert = task.error_follow_up or (hazards and is_warning(task_text))
        unsafe = unsafe_first_moves(task_text) if alert and hazards else ()
        return cls(objects, word_groups(task.instruction) if objects else (), alert, unsafe, asks_to_hold(task))


# Words by which a task asks an arm to end holding something ("pick up the cup", "grab the
# bottle", "lift it", "hand me the pen": a hand-over ends with the object in the gripper).
# Calls quoted in the text (an `[E]` follow-up's plan) are not read.
_HOLD = re.compile(
    r"\b(?:pick|picks|grab|grabs|take|takes|lift|lifts|hold|holds|holding|grasp|grasps|get|fetch|raise"
    r"|bring|brings|hand (?:me|it|over)|give (?:me|it)|pass me)\b"
)


def asks_to_hold(task: TaskText) -> bool:
    """Whether the instruction asks the arm to hold something at the end (`_HOLD`)."""
    return _HOLD.search(QUOTED_CALL.sub(" ", task.instruction.lower())) is not None


def _nameable(name: str) -> bool:
    return 0 < len(name) <= 40 and not set(name) & set("\\\n")


# How each syntax quotes an object's name: with the first of its quotes the name does not hold,
# and never a name holding what its strings cannot (MiniSpec: the marks that end statements and
# blocks, and any quote).
_QUOTES = {"minispec": ("'",), "python": ("'", '"')}
_NOT_IN_STRINGS = {"minispec": set('{};"'), "python": set()}


def _quoted(name: str, syntax: str) -> str | None:
    if set(name) & _NOT_IN_STRINGS[syntax]:
        return None
    return next((f"{q}{name}{q}" for q in _QUOTES[syntax] if q not in name), None)


def word_groups(instruction: str, longest: int = 3) -> tuple[str, ...]:
    """The instruction's runs of one to `longest` words (lower case) that could name an object:
    none crosses punctuation or begins or ends with a function word (or `alert`)."""
    groups = []
    for clause in re.split(r"[,.;:!?()\[\]]", instruction.lower()):
        words = re.findall(r"[a-z][a-z0-9_-]*", clause)
        for start in range(len(words)):
            for end in range(start + 1, min(start + longest, len(words)) + 1):
                run = words[start:end]
                if run[0] in _NOT_NAME_EDGES or run[-1] in _NOT_NAME_EDGES or len(max(run, key=len)) > 16:
                    continue
                groups.append(" ".join(run))
    return tuple(dict.fromkeys(groups))


def _names_rule(rule: str, quoted: list[str]) -> str:
    return f"{rule} ::= " + " | ".join(_ebnf_string(q) for q in quoted) + "\n"


@lru_cache(maxsize=1024)  # a live planner sees the same scenes again and again
def plan_grammar(skill_set: SkillSet, scope: TaskScope = TaskScope()) -> str:
    """The plans constrained decoding admits for a task (a subset of the syntax), as EBNF."""
    grammar = _grammar(
        skill_set, plan=True, alert=scope.alert, unsafe_first=scope.unsafe_first, grasp_last=scope.grasp_last
    )
    names = {n: q for n in scope.objects if (q := _quoted(n, skill_set.syntax))}
    if not names:  # no scene, or none of its names can be written in this syntax
        return grammar + _ANY_OBJECT
    extra = [f"'{w}'" for w in scope.task_words if w not in names]
    return (
        grammar
        + _names_rule("obj", list(names.values()))
        + (_names_rule("qobj", extra).replace("::= ", "::= obj | ", 1) if extra else "qobj ::= obj\n")
    )


@lru_cache(maxsize=1)
def _check_compiler():
    import xgrammar as xgr

    # Character-level check: no vocabulary needed. Compiled grammars are cached below, not here.
    return xgr.GrammarCompiler(xgr.TokenizerInfo([]), cache_enabled=False)


@lru_cache(maxsize=256)
def _compiled_for_check(grammar: str):
    return _check_compiler().compile_grammar(grammar)


def check_plan(skill_set: SkillSet, plan: str, strict: bool = False, scope: TaskScope = TaskScope()) -> str | None:
    """None if `plan` is a complete sentence of the skill set's syntax (`strict`: of its plan
    grammar for a task of that `scope`), else the reason."""
    import xgrammar as xgr

    if not plan.strip():
        return "empty plan"
    grammar = plan_grammar(skill_set, scope) if strict else syntax_grammar(skill_set)
    matcher = xgr.GrammarMatcher(_compiled_for_check(grammar), terminate_without_stop_token=True)
    if not matcher.accept_string(plan):
        return "not in the skill set's plan grammar" if strict else "not in the skill set's syntax"
    if not matcher.is_completed():
        return "plan ends in the middle of a statement"
    if skill_set.syntax == "python":
        try:
            ast.parse(plan)
        except SyntaxError as exc:
            return f"Python syntax error: {exc.msg} (line {exc.lineno})"
    return None
