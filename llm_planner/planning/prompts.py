"""How a task becomes a generation request: the one place that writes what the model reads.

Per skill set, a shared part (system text with the skills, few-shot examples, the plan
grammar) that the engine keeps in its prefix cache; per task, the user turn. A model tuned for
the skill set (`Engine.tuned_skill_sets`) knows the skills and gets one short system turn
instead (`SkillSet.tuned_chat_prefix`, what it was tuned on).
"""

from __future__ import annotations

import dataclasses
from functools import cache

from llm_planner.catalog.grammar import TaskScope, plan_grammar
from llm_planner.catalog.scene import render_task
from llm_planner.catalog.skills import SkillSet
from llm_planner.engine.base import GenerationRequest


@cache
def shared_request(skill_set: SkillSet, tuned: bool = False) -> GenerationRequest:
    """The skill set's shared prefix as a request (also what warm-up prefills)."""
    chat_prefix = skill_set.tuned_chat_prefix() if tuned else skill_set.chat_prefix()
    prefix = "\n".join(text for _, text in chat_prefix) if tuned else skill_set.prompt()
    key = f"{skill_set.name}/tuned" if tuned else skill_set.name
    return GenerationRequest(
        f"warm-up/{key}",
        key,
        prefix,
        "warm-up",
        forced_output="",
        chat_prefix=chat_prefix,
        grammar=plan_grammar(skill_set),
        plan_syntax=skill_set.syntax,
        plan_token_scale=skill_set.plan_token_scale,
    )


def user_turn(task_text: str) -> str:
    """The task as the model reads it: in either input style, its objects, then the
    instruction (catalog/scene.py)."""
    return render_task(task_text)


def plan_request(
    gen_id: str,
    skill_set: SkillSet,
    task_text: str,
    recorded_plan: str | None = None,
    max_tokens: int = 512,
    tuned: bool = False,
    task_grammar: bool = True,
    grammar_skill_set: SkillSet | None = None,
    examples: tuple[tuple[str, str], ...] = (),
    alert_hazards: bool = True,
) -> GenerationRequest:
    """`task_grammar`: the plan grammar of this task (its scene's objects; an error follow-up
    opens with a plain action; with `alert_hazards`, one that moves neither toward the hazard
    nor toward an object) rather than the skill set's. `grammar_skill_set`: the skill set
    the robot's safety gate leaves (catalog/safety.py), for the grammar only: the prompt stays
    the skill set's, which the engine keeps cached. `examples`: solved tasks shown before this
    one (planning/retrieval.py)."""
    request = shared_request(skill_set, tuned)
    grammar: str | None
    scope = TaskScope.of_task(task_text, alert_hazards) if task_grammar else TaskScope()
    if grammar_skill_set is None and task_grammar:
        grammar = plan_grammar(skill_set, scope)
    elif grammar_skill_set is None:
        grammar = request.grammar
    else:
        grammar = plan_grammar(grammar_skill_set, scope)
    return dataclasses.replace(
        request,
        gen_id=gen_id,
        prompt=user_turn(task_text),
        examples=examples,
        forced_output=recorded_plan,
        max_tokens=max_tokens,
        grammar=grammar,
    )
