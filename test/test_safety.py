"""A robot's safety gate: the plan grammar cut to what it allows, and each call checked again."""

import os

import pytest

from llm_planner.catalog.safety import SafetyRules, restricted
from llm_planner.catalog.skills import load_skill_set

DRONE = load_skill_set("minispec_drone")
RULES = SafetyRules.of(DRONE, forbid=["mu"], bounds={"mf": (0, 100), "tc": (0, 90)}, approve=["tp"])


def calls(text: str):
    return DRONE.find_calls(text)


def test_the_gate_names_what_it_stops_and_what_waits_for_approval():
    mf, mu, tc, tp = calls("mf(150);mu(50);tc(90);tp();")
    assert RULES.violation(mf) == "mf(150): 150 is outside 0..100"
    assert RULES.violation(mu) == "mu(50): skill mu is not allowed for this robot"
    assert RULES.violation(tc) is None and RULES.violation(tp) is None
    assert RULES.needs_approval(tp) and not RULES.needs_approval(tc)
    only = SafetyRules.of(DRONE, allow=["move_forward", "tp"])  # by name or abbreviation
    assert only.allowed == {"mf", "tp"}
    assert only.violation(calls("tc(90);")[0]) == "tc(90): skill tc is not allowed for this robot"


@pytest.mark.parametrize("rules, reason", [
    (dict(forbid=["fly_to_the_moon"]), "has no skill 'fly_to_the_moon'"),
    (dict(bounds={"tp": (0, 1)}), "skill tp has no numeric argument to bound"),
    (dict(bounds={"mf": (100, 50)}), "100 is above 50"),
    (dict(allow=["mf"], forbid=["mf"]), "allows no skill at all"),
])
def test_rules_that_cannot_hold_are_refused(rules, reason):
    with pytest.raises(ValueError, match=reason):
        SafetyRules.of(DRONE, **rules)


def test_the_restricted_skill_set_keeps_the_rest_and_is_made_once():
    cut = restricted(DRONE, RULES)
    assert "mu" not in {s.abbr for s in cut.spec.skills} and len(cut.spec.skills) == len(DRONE.spec.skills) - 1
    mf = next(a for a in cut.skill("mf").args if a.type in ("int", "float"))
    assert (mf.min, mf.max) == (20, 100)  # the robot's own lower bound stays
    assert restricted(DRONE, RULES) is cut and cut.prompt() != DRONE.prompt()


@pytest.mark.skipif(not os.environ.get("LLM_PLANNER_REQUIRE_VLLM") and not __import__("importlib").util.find_spec(
    "xgrammar"), reason="xgrammar comes with vLLM")
@pytest.mark.parametrize("plan, admitted", [
    ("mf(50);tc(90);tp();", True),
    ("mf(100);", True),
    ("mf(101);", False),  # never generated: the grammar has no such number
    ("mu(50);", False),  # nor the forbidden skill
    ("tc(180);", False),
])
def test_the_robots_plan_grammar_never_admits_what_the_gate_stops(plan, admitted):
    from llm_planner.catalog.grammar import check_plan

    assert (check_plan(restricted(DRONE, RULES), plan, strict=True) is None) == admitted
    assert check_plan(DRONE, plan, strict=True) is None  # the skill set alone admits them all


def gated(config, tokenizer, **rules):
    from driven import Driven

    return Driven(config, tokenizer, max_batch=4, safety={"drone0": SafetyRules.of(DRONE, **rules)})


def task(task_id: str, plan: str, robot: str = "drone0"):
    from llm_planner.domain.tasks import TaskRequest
    from llm_planner.domain.tuf import Tuf

    return TaskRequest(task_id, robot, "tello", "Scene: [door]. Fly forward.", "normal", Tuf(1, 1, 1.5), 0.0, plan)


def test_a_segment_the_gate_stops_is_never_sent_and_the_task_fails_with_the_reason(config, tokenizer):
    from llm_planner.domain.tasks import TaskState

    driven = gated(config, tokenizer, forbid=["mu"], bounds={"mf": (0, 100)})
    driven.planner.submit(task("climb", "mf(50);mu(50);tp();"))
    driven.planner.submit(task("far", "mf(300);"))
    driven.planner.submit(task("other-robot", "mu(50);", robot="drone1"))  # not gated
    driven.run()
    records = driven.planner.records
    assert records["climb"].state == TaskState.FAILED and driven.sent("climb") == ["mf(50);"]
    assert records["climb"].message == ("safety gate: mu(50): skill mu is not allowed for this robot; "
                                        "the segment was not sent")
    assert records["far"].state == TaskState.FAILED and driven.sent("far") == []
    assert "300 is outside 0..100" in records["far"].message
    assert records["other-robot"].state == TaskState.SUCCEEDED


def test_a_call_that_needs_approval_waits_for_it_and_the_wait_costs_utility(config, tokenizer):
    from driven import Driven

    from llm_planner.domain.tasks import TaskState

    plain = Driven(config, tokenizer, max_batch=4)
    plain.planner.submit(task("photo", "mf(50);tp();"))
    plain.run()
    driven = gated(config, tokenizer, approve=["tp"], approval_timeout_s=60)
    driven.planner.submit(task("photo", "mf(50);tp();"))
    driven.run_until(10.0)
    assert driven.sent("photo") == ["mf(50);"] and driven.planner.gate.waiting["photo"].call == "tp()"
    assert driven.planner.records["photo"].state != TaskState.SUCCEEDED  # its plan is done, its approval is not
    assert driven.planner.approve("photo", True) == ""
    driven.run()
    record = driven.planner.records["photo"]
    assert record.state == TaskState.SUCCEEDED and driven.sent("photo") == ["mf(50);", "tp();"]
    assert record.utility < plain.planner.records["photo"].utility  # the robot waited for the approval
    assert driven.planner.approve("photo", True) == "task 'photo' is not waiting for an approval"


def test_a_denied_or_unanswered_approval_fails_the_task_closed(config, tokenizer):
    from llm_planner.domain.tasks import TaskState

    driven = gated(config, tokenizer, approve=["tp"], approval_timeout_s=5)
    driven.planner.submit(task("denied", "tp();"))
    driven.planner.submit(task("unanswered", "mf(50);tp();"))
    driven.run_until(1.0)
    assert driven.planner.approve("denied", False, "not over the crowd") == ""
    driven.run_until(8.0)
    driven.planner.step()
    driven.run()
    records = driven.planner.records
    assert records["denied"].state == TaskState.FAILED and driven.sent("denied") == []
    assert records["denied"].message == "tp() denied by an operator: not over the crowd"
    assert records["unanswered"].state == TaskState.FAILED and driven.sent("unanswered") == ["mf(50);"]
    assert records["unanswered"].message == "tp() was not approved within 5 s (the safety gate fails closed)"
