"""Plan grammars built from the skill sets (xgrammar comes with vLLM)."""

import os

import pytest

if not os.environ.get("LLM_PLANNER_REQUIRE_VLLM"):
    pytest.importorskip("xgrammar")

from llm_planner.catalog.grammar import check_plan, plan_grammar
from llm_planner.catalog.skills import load_skill_set

SKILL_SETS = ["minispec_drone", "minispec_arm", "python_arm"]


@pytest.mark.parametrize("name", SKILL_SETS)
def test_every_example_plan_of_a_skill_set_is_in_its_grammar(name):
    skill_set = load_skill_set(name)
    assert skill_set.spec.examples
    for example in skill_set.spec.examples:
        assert check_plan(skill_set, example["plan"]) is None, example["plan"]


@pytest.mark.parametrize("plan, reason", [
    ("mf(50);tp();", None),
    ("?iv('cup')==True{g('cup');tp()};mb(20);", None),
    ("3{tc(120);tp()};", None),
    ("mf(50)", "plan ends in the middle of a statement"),
    ("fly_forward(50);", "not in the skill set's plan grammar"),  # not a skill
    ("mf('door');", "not in the skill set's plan grammar"),  # wrong argument type
    ("tc(90,90);", "not in the skill set's plan grammar"),  # wrong arity
    ("3{3{tc(90)}};", "not in the skill set's plan grammar"),  # nested block
    ("", "empty plan"),
])
def test_minispec_grammar_accepts_plans_and_names_the_problem(plan, reason):
    assert check_plan(load_skill_set("minispec_drone"), plan) == reason


def test_python_grammar_checks_calls_blocks_and_syntax():
    arm = load_skill_set("python_arm")
    good = "for obj in ['cup', 'pen']:\n    take(obj)\n    drop('tray')\nsay('done')\n"
    assert check_plan(arm, good) is None
    assert check_plan(arm, "grab('cup')\n") == "not in the skill set's plan grammar"
    assert check_plan(arm, "take('cup', 'pen')\n") == "not in the skill set's plan grammar"
    assert check_plan(arm, "if is_holding():\ntake('cup')\n") == "not in the skill set's plan grammar"


def test_grammar_lists_every_skill_of_the_set():
    for name in SKILL_SETS:
        skill_set = load_skill_set(name)
        grammar = plan_grammar(skill_set)
        for skill in skill_set.spec.skills:
            assert f'"{skill.abbr}(' in grammar
