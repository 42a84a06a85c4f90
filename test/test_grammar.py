"""Plan grammars built from the skill sets (xgrammar comes with vLLM)."""

import os

import pytest

if not os.environ.get("LLM_PLANNER_REQUIRE_VLLM"):
    pytest.importorskip("xgrammar")

from llm_planner.catalog.grammar import check_plan, int_range, plan_grammar
from llm_planner.catalog.skills import load_skill_set
from llm_planner.lrtrace.load import load_traces
from llm_planner.settings.config import load_planner_config
from llm_planner.settings.paths import data_path

SKILL_SETS = ["minispec_drone", "minispec_arm", "python_arm"]


@pytest.mark.parametrize("name", SKILL_SETS)
def test_every_example_plan_of_a_skill_set_is_in_its_plan_grammar(name):
    skill_set = load_skill_set(name)
    assert skill_set.spec.examples
    for example in skill_set.spec.examples:
        assert check_plan(skill_set, example["plan"], strict=True) is None, example["plan"]


@pytest.mark.parametrize("plan, reason", [
    ("mf(50);tp();", None),
    ("?iv('cup')==True{g('cup');tp()};mb(20);", None),
    ("3{tc(120);tp()};", None),
    ("mf(50)", "plan ends in the middle of a statement"),
    ("fly_forward(50);", "not in the skill set's syntax"),  # not a skill
    ("mf('door');", "not in the skill set's syntax"),  # wrong argument type
    ("tc(90,90);", "not in the skill set's syntax"),  # wrong arity
    ("3{3{tc(90)}};", "not in the skill set's syntax"),  # nested block
    ("", "empty plan"),
])
def test_minispec_grammar_accepts_plans_and_names_the_problem(plan, reason):
    assert check_plan(load_skill_set("minispec_drone"), plan) == reason


def test_python_grammar_checks_calls_blocks_and_syntax():
    arm = load_skill_set("python_arm")
    good = "for obj in ['cup', 'pen']:\n    take(obj)\n    drop('tray')\nsay('done')\n"
    assert check_plan(arm, good) is None
    assert check_plan(arm, "grab('cup')\n") == "not in the skill set's syntax"
    assert check_plan(arm, "take('cup', 'pen')\n") == "not in the skill set's syntax"
    assert check_plan(arm, "if is_holding():\ntake('cup')\n") == "not in the skill set's syntax"


def test_every_recorded_plan_parses():
    config = load_planner_config()
    for trace in load_traces(data_path("config", "traces", "timely_tasks.yaml")).traces:
        skill_set = load_skill_set(config.robot_type(trace.robot_type).skill_set)
        assert check_plan(skill_set, trace.plan) is None, trace.plan


@pytest.mark.parametrize("name, plan", [
    ("python_arm", "x = x\n"),  # does nothing
    ("python_arm", "pick_up_bolt = take('bolt')\n"),  # a made-up name
    ("python_arm", "x = object_x('bolt')\nmove_to(x, 0.2)\n"),  # a plan sets no variables
    ("python_arm", "take(obj)\n"),  # `obj` outside the loop that binds it
    ("minispec_drone", "_1=od('cup');?_1>100{mf(50)};"),
    ("python_arm", "['bolt', 'nut']\n"),  # a bare list
    ("python_arm", "for obj in ['a']:\n    x = y\n"),  # a loop that calls nothing
    ("minispec_drone", "->True;"),  # a return with nothing to return to
    ("minispec_drone", "t();"),  # a query whose value nobody reads
    ("python_arm", "object_x('cup')\n"),
    ("python_arm", "take(object_x('bin'))\n"),  # an object is a name, not a coordinate
    ("minispec_arm", "g('pick up the cup');"),  # an object is a short name, not a phrase
    ("python_arm", "take(')sponge')\n"),  # nor code
    ("minispec_drone", "_2=d(2);"),  # an action's result is not assigned
    ("minispec_drone", "1{tp()};"),  # a loop that runs once
    ("minispec_drone", "2{tp()};" * 5),  # more than four blocks
    ("minispec_drone", "mf(5000);"),  # beyond what the robot accepts (20-500 cm)
    ("minispec_drone", "d(100);"),  # a plan waits at most 10 s
    ("minispec_drone", "mf(010);"),
    ("minispec_drone", "tp();" * 17),  # more than 16 top-level statements
    ("minispec_drone", "2{" + "tp();" * 9 + "};"),  # a block of more than 8
])
def test_the_plan_grammar_admits_only_statements_that_act(name, plan):
    skill_set = load_skill_set(name)
    assert check_plan(skill_set, plan, strict=True) == "not in the skill set's plan grammar"


@pytest.mark.parametrize("name, plan", [("python_arm", "x = x\n"), ("minispec_drone", "->True;"),
                                        ("minispec_drone", "tp();" * 17)])
def test_the_syntax_is_wider_than_the_plan_grammar(name, plan):
    assert check_plan(load_skill_set(name), plan) is None


@pytest.mark.parametrize("name, plan", [
    ("python_arm", "for obj in ['bolt', 'nut']:\n    move_to(object_x(obj), object_y(obj))\n    take(obj)\n"
                   "    drop('bin')\n"
                   "for i in range(3):\n    say('beep')\nif is_holding():\n    drop('bin')\n"),
    ("minispec_drone", "?od('person')>100{mf(50)};" + "tp();" * 15 + "2{tc(90);tp()};"),
])
def test_the_plan_grammar_keeps_loops_conditions_and_long_plans(name, plan):
    assert check_plan(load_skill_set(name), plan, strict=True) is None


@pytest.mark.parametrize("lo, hi", [(20, 500), (1, 360), (0, 10), (5, 5), (7, 123)])
def test_integer_ranges_admit_exactly_their_numbers(lo, hi):
    import xgrammar as xgr

    compiled = xgr.GrammarCompiler(xgr.TokenizerInfo([])).compile_grammar(f"root ::= {int_range(lo, hi)}\n")

    def admits(text):
        matcher = xgr.GrammarMatcher(compiled, terminate_without_stop_token=True)
        return matcher.accept_string(text) and matcher.is_completed()

    assert [n for n in range(0, 1100) if admits(str(n))] == list(range(lo, hi + 1))
    assert not admits("0" + str(hi))  # no leading zeros


def test_grammar_lists_every_skill_of_the_set():
    for name in SKILL_SETS:
        skill_set = load_skill_set(name)
        grammar = plan_grammar(skill_set)
        for skill in skill_set.spec.skills:
            assert f'"{skill.abbr}(' in grammar


def _in_task_grammar(name: str, task: str, plan: str) -> bool:
    from llm_planner.catalog.grammar import TaskScope

    return check_plan(load_skill_set(name), plan, strict=True, scope=TaskScope.of_task(task)) is None


@pytest.mark.parametrize("plan, admitted", [
    ("g('red car');tp();", True),
    ("g('violin');", False),  # an action names only what the scene lists
    ("g('Red car');", False),  # exactly as the scene spells it
    ("?s('violin')==True{g('violin');tp()};", True),  # a search, and its conditional, may name what the task names
    ("?s('trumpet')==True{g('trumpet')};", False),  # but not what neither names
    ("l(p('how many poles are there?'));", True),  # a report may say a probe's answer
])
def test_a_tasks_grammar_grounds_object_names_in_its_scene(plan, admitted):
    task = "Scene: [wall, poster, red car]. Look for the violin and photograph it."
    assert _in_task_grammar("minispec_drone", task, plan) is admitted
    assert _in_task_grammar("minispec_drone", "Fly around.", plan)  # no scene: any short name


@pytest.mark.parametrize("plan, admitted", [
    ("move_to(object_x('candle holder'), object_y('candle holder'))\ndrop('candle holder')\n", True),
    ("move_to(object_x('holder'), object_y('holder'))\n", False),  # the arm goes where a scene object is
    ("move_to(object_x('candle'), object_y('holder'))\n", False),
    ("for obj in ['candle']:\n    move_to(object_x(obj), object_y(obj))\n    take(obj)\n", True),
    ("if object_x('matches') > 0:\n    say('found them')\n", True),  # a test may name what the task names
    ("if object_x('matches') > 0:\n    move_to(object_x('matches'), object_y('matches'))\n", False),
    ("for obj in ['candle']:\n    move_to(object_x('holder'), object_y('holder'))\n", False),
    ("say(take('candle'))\n", False),  # an action's argument is never another action
])
def test_an_arm_moves_only_to_scene_objects(plan, admitted):
    task = "Scene: [candle, candle holder]. Look for the matches, take the candle and put it on the holder."
    assert _in_task_grammar("python_arm", task, plan) is admitted


def test_an_arm_whose_gate_allows_no_query_moves_to_coordinates():
    from llm_planner.catalog.grammar import TaskScope
    from llm_planner.catalog.safety import SafetyRules, restricted

    arm = load_skill_set("python_arm")
    gated = restricted(arm, SafetyRules.of(arm, allow=["move_to", "take", "drop"]))
    scope = TaskScope.of_task("Scene: [cup, tray]. Put the cup on the tray.")
    plan = "move_to(0.3, 0.4)\ntake('cup')\nmove_to(0.6, 0.2)\ndrop('tray')\n"
    assert check_plan(gated, plan, strict=True, scope=scope) is None
    assert check_plan(gated, "move_to(object_x('cup'), object_y('cup'))\n", strict=True, scope=scope) is not None


@pytest.mark.parametrize("name, plan, admitted", [
    ("minispec_drone", "mb(50);?s('poster')==True{g('poster')};", True),
    ("minispec_drone", "?s('wall')==True{mb(50)};", False),  # a block is sent only once it closes
    ("python_arm", "move_to(object_x('cup'), object_y('cup'))\ntake('cup')\nsay('got it')\n", True),
    ("python_arm", "if is_holding():\n    drop('tray')\n", False),
])
def test_an_error_follow_up_opens_with_a_plain_action(name, plan, admitted):
    scene = "Scene: [wall, poster]." if name == "minispec_drone" else "Scene: [cup, tray]."
    assert _in_task_grammar(name, f"ALERT: something went wrong. {scene} Recover.", plan) is admitted
    artifact = f"{scene.rstrip('.')}, Task: [E] You provided me with plan tp();, but it failed."
    assert _in_task_grammar(name, artifact, plan) is admitted
    assert _in_task_grammar(name, f"{scene} Recover.", plan)  # not an alert: a block may come first


_MOVE_CUP = "move_to(object_x('cup'), object_y('cup'))\n"


@pytest.mark.parametrize("name, plan, admitted", [
    ("minispec_arm", "g('cup');pk('cup');g('tray');dr('tray');g('lid');pk('lid');", True),
    ("minispec_arm", "g('cup');pk('cup');g('lid');pk('lid');", False),  # grasps while it holds the cup
    ("minispec_arm", "g('tray');dr('tray');l('x');dr('tray');", False),  # releases what it released
    ("minispec_arm", "dr('tray');g('cup');pk('cup');", True),  # it may hold something from before the plan
    ("minispec_arm", "pk('cup');2{g('lid');pk('lid');dr('tray')};pk('cup');", True),  # after a block: not known
    ("minispec_arm", "l('go');2{g('cup');pk('cup');g('lid');pk('lid');dr('tray')};", False),  # a body too
    ("minispec_arm", "l('go');2{g('cup');pk('cup')};", False),  # the second pass would grasp while holding
    ("minispec_arm", "l('go');?iv('cup')==True{g('cup');pk('cup')};", True),  # a conditional runs once
    ("python_arm", "say('go')\nfor obj in ['cup', 'lid']:\n    take(obj)\n", False),
    ("python_arm", "say('go')\nfor obj in ['cup']:\n    take(obj)\n", True),  # one object: one pass
    ("python_arm", "say('go')\nfor i in range(2):\n    take('cup')\n    drop('tray')\n", True),
    ("python_arm", _MOVE_CUP + "take('cup')\n" + _MOVE_CUP + "drop('tray')\ntake('lid')\n", True),
    ("python_arm", _MOVE_CUP + "take('cup')\n" + _MOVE_CUP + "take('tray')\n", False),
    ("python_arm", "drop('tray')\nsay('done')\ndrop('cup')\n", False),
    ("python_arm", "take('cup')\nif is_holding():\n    drop('tray')\ntake('lid')\n", True),
])
def test_the_gripper_holds_one_object_at_a_time(name, plan, admitted):
    task = "Scene: [cup, lid, tray]. Tidy up, then hold what is left."
    assert _in_task_grammar(name, task, plan) is admitted
    # an alert's first action counts too
    assert _in_task_grammar(name, f"ALERT: the cup slipped. {task}", plan) is admitted


def test_a_scene_object_is_named_as_each_syntax_can_quote_it():
    task = "Scene: [kid's cup, cup;1, plate]. Put the kid's cup on the plate."
    place = "move_to(object_x('plate'), object_y('plate'))\ndrop('plate')\n"
    assert _in_task_grammar("python_arm", task, "take(\"kid's cup\")\n" + place)
    assert _in_task_grammar("python_arm", task, "take('cup;1')\n" + place)
    assert not _in_task_grammar("python_arm", task, "take('kid')\n" + place)
    # MiniSpec's strings hold no quote, semicolon or brace: those objects cannot be named
    assert _in_task_grammar("minispec_arm", task, "g('plate');pk('plate');l('x');")
    assert not _in_task_grammar("minispec_arm", task, "g('cup');pk('cup');l('x');")
    # where no object of the scene can be named, any short name is admitted
    assert _in_task_grammar("minispec_arm", "Scene: [kid's cup]. Lift it.", "g('cup');pk('cup');")


_TAKE_CUP = _MOVE_CUP + "take('cup')\n"


@pytest.mark.parametrize("task, minispec, python, admitted", [
    # it stops right after grasping
    ("Put the cup on the tray.", "g('cup');pk('cup');", _TAKE_CUP, False),
    ("Put the cup on the tray.", "g('cup');pk('cup');g('tray');dr('tray');",
     _TAKE_CUP + "move_to(object_x('tray'), object_y('tray'))\ndrop('tray')\n", True),
    ("Put the cup on the tray.", "g('cup');pk('cup');l('cannot reach the tray');",
     _TAKE_CUP + "say('cannot reach the tray')\n", True),
    ("Put the cup on the tray.", "2{g('cup');l('x')};g('cup');pk('cup');",
     "for i in range(2):\n    say('x')\n" + _TAKE_CUP, False),  # after a block too
    ("Pick up the cup.", "g('cup');pk('cup');", _TAKE_CUP, True),  # the task asks it to hold the cup
    ("Grab the cup and keep it.", "g('cup');pk('cup');", _TAKE_CUP, True),
    ("Hand me the cup.", "g('cup');pk('cup');", _TAKE_CUP, True),  # a hand-over ends holding it
    # an error follow-up's quoted plan is no request to hold
    ("Task: [E] You provided me with plan take('cup'), but it failed.", "g('cup');pk('cup');", _TAKE_CUP, False),
])
def test_a_plan_does_not_stop_right_after_a_grasp_unless_asked_to_hold(task, minispec, python, admitted):
    assert _in_task_grammar("minispec_arm", f"Scene: [cup, tray]. {task}", minispec) is admitted
    assert _in_task_grammar("python_arm", f"Scene: [cup, tray]. {task}", python) is admitted


def test_a_skill_set_without_a_gripper_keeps_one_small_grammar():
    import dataclasses

    from llm_planner.catalog.grammar import TaskScope

    drone = load_skill_set("minispec_drone")
    scope = TaskScope.of_task("Scene: [cup, tray]. Fly to the cup.")
    assert not scope.grasp_last  # the task asks to hold nothing, but a drone holds nothing
    grammar = plan_grammar(drone, scope)
    assert grammar == plan_grammar(drone, dataclasses.replace(scope, grasp_last=True))
    assert "run1_h_" not in grammar and "frun" not in grammar


def test_a_python_block_starts_from_the_gripper_before_it():
    task = "Scene: [cup, lid, tray]. Tidy up, then hold what is left."
    took = _MOVE_CUP + "take('cup')\n"
    assert not _in_task_grammar("python_arm", task, took + "for obj in ['lid']:\n    take(obj)\n")
    assert _in_task_grammar("python_arm", task, took + "drop('tray')\nfor obj in ['lid']:\n    take(obj)\n")
    assert _in_task_grammar("python_arm", task, took + "if is_holding():\n    drop('tray')\n")


@pytest.mark.parametrize("name, statement", [("minispec_arm", "l('x');"), ("python_arm", "say('x')\n")])
def test_a_run_that_tracks_the_gripper_still_ends(name, statement):
    skill_set = load_skill_set(name)
    assert check_plan(skill_set, statement * 16, strict=True) is None
    assert check_plan(skill_set, statement * 17, strict=True) == "not in the skill set's plan grammar"


def test_task_grammars_are_built_once_per_scene():
    from llm_planner.catalog.grammar import TaskScope, word_groups

    drone = load_skill_set("minispec_drone")
    scope = TaskScope.of_task("Scene: [door]. Find the blue kite.")
    assert plan_grammar(drone, scope) is plan_grammar(drone, TaskScope.of_task("Scene: [door]. Find the blue kite."))
    assert plan_grammar(drone, scope) != plan_grammar(drone)
    assert word_groups("Find the blue kite and the trash can, then land.") == (
        "find", "find the blue", "blue", "blue kite", "kite", "trash", "trash can", "can", "land")
