"""Plan grammars: each skill set's plan language as an EBNF grammar (xgrammar's dialect), built
from the skill list, so constrained decoding can only emit plans that parse and whose every
call is one of the robot's skills with the right number of arguments.

MiniSpec  statements end with ';' (optional before '}' and after a block), loops `N{...}`
          (N < 100), conditionals `?a==b&c<d{...}`, assignments `_1=call`, returns `->value`.
          A block holds up to eight simple statements and no nested block: a block is sent to
          the robot only once it closes, so it must close soon.
Python    one statement per line (a skill call or `name = expr`), `for`/`if`/`else` blocks
          one level deep with a four-space body.
Literals are bounded (names, strings, numbers), so a weak model cannot run on inside one.

`check_plan` tells whether a complete plan is in the language (used to report plan validity
with and without the constraint); it needs xgrammar, which comes with vLLM.
"""

from __future__ import annotations

import ast
from functools import lru_cache

from llm_planner.catalog.skills import Skill, SkillSet

_COMMON = r'''
int ::= [0-9] | [1-9] [0-9]{1,4}
number ::= "-"? int ("." [0-9]{1,3})?
'''

_MINISPEC = r'''
root ::= stmt+
stmt ::= simple ";" | block ";"?
body ::= (simple ";"){0,7} simple ";"?
block ::= [1-9] [0-9]? "{" body "}" | "?" condition "{" body "}"
simple ::= call | var "=" call | "->" value
condition ::= comparison (("&" | "|") comparison)*
comparison ::= value (("==" | "!=" | ">" | "<") value)?
value ::= call | number | string | var | "True" | "False"
num ::= number | var
str ::= string | var
string ::= "'" [^'\n{};]{1,40} "'"
var ::= "_" [1-9]
'''

_PYTHON = r'''
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
'''

# Argument rule per declared type, per syntax.
_ARG_RULES = {
    "minispec": {"int": "num", "float": "num", "str": "str", "expr": "value"},
    "python": {"int": "expr", "float": "expr", "str": "expr", "expr": "expr"},
}


def _ebnf_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _call_alternative(skill: Skill, syntax: str) -> str:
    rules = _ARG_RULES[syntax]
    separator = ' "," ' if syntax == "minispec" else ' ", " '
    args = separator.join(rules[a.type] for a in skill.args)
    if not skill.args:
        # MiniSpec lets a call without arguments drop its parentheses (`tp`); keep them.
        return _ebnf_string(f"{skill.abbr}()")
    return f"{_ebnf_string(skill.abbr + '(')} {args} {_ebnf_string(')')}"


@lru_cache(maxsize=None)
def _grammar_for(name: str, syntax: str, calls: tuple[str, ...]) -> str:
    body = _MINISPEC if syntax == "minispec" else _PYTHON
    call_rule = "call ::= " + " | ".join(calls)
    return (body + _COMMON).strip() + "\n" + call_rule + "\n"


def plan_grammar(skill_set: SkillSet) -> str:
    """The skill set's plan language as EBNF (root rule `root`)."""
    syntax = skill_set.syntax
    if syntax not in _ARG_RULES:
        raise ValueError(f"no plan grammar for syntax {syntax!r}")
    calls = tuple(_call_alternative(s, syntax) for s in skill_set.spec.skills)
    return _grammar_for(skill_set.name, syntax, calls)


@lru_cache(maxsize=None)
def _compiled_for_check(grammar: str):
    import xgrammar as xgr

    # Character-level check: no vocabulary needed.
    return xgr.GrammarCompiler(xgr.TokenizerInfo([])).compile_grammar(grammar)


def check_plan(skill_set: SkillSet, plan: str) -> str | None:
    """None if `plan` is a complete sentence of the skill set's grammar, else the reason."""
    import xgrammar as xgr

    if not plan.strip():
        return "empty plan"
    matcher = xgr.GrammarMatcher(_compiled_for_check(plan_grammar(skill_set)), terminate_without_stop_token=True)
    if not matcher.accept_string(plan):
        return "not in the skill set's plan grammar"
    if not matcher.is_completed():
        return "plan ends in the middle of a statement"
    if skill_set.syntax == "python":
        try:
            ast.parse(plan)
        except SyntaxError as exc:
            return f"Python syntax error: {exc.msg} (line {exc.lineno})"
    return None
