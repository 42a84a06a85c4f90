"""Where an alert places its hazard, and the first move its plan may make."""

import random

import pytest

from llm_planner.catalog.grammar import TaskScope, check_plan
from llm_planner.catalog.hazards import alert_account, hazard_directions, is_warning, unsafe_first_moves
from llm_planner.catalog.skills import load_skill_set


@pytest.mark.parametrize(
    "text, directions",
    [
        ("ALERT: a wall is 20 cm ahead. Scene: [wall]. Back off.", ("forward",)),
        ("ALERT: the shelf is right in front of you.", ("forward",)),
        ("ALERT: the lamp is right above you. Fly ahead when it is clear.", ("up",)),  # the request is not read
        ("ALERT: a dog jumped up right below you.", ("down",)),  # "right" as in "just": no direction
        ("ALERT: a bird dives at you from the left side!", ("left",)),
        ("ALERT: someone is standing to your right and a pole is behind you.", ("backward", "right")),
        ("ALERT: the cat left the room, go ahead and look for it.", ()),  # "left" the verb, "go ahead" the idiom
        ("ALERT: you are 20 cm below the ceiling. Scene: [ceiling]. Get clear.", ("up",)),  # the robot as subject
        ("ALERT: the drone is 10 cm to the right of the wall.", ("left",)),
        ("ALERT: you are 20 cm above the floor, too low.", ("down",)),
        ("ALERT! A wall is 20 cm ahead.", ("forward",)),
        ("ALERT: Obstacle! A wall is 20 cm ahead. Scene: [wall]. Back off.", ("forward",)),  # up to the scene
        ("ALERT: Wall ahead. Pole 20 cm on your left. Scene: [wall, pole]. Go.", ("forward", "left")),
        ("ALERT: a cable hangs beneath you and a branch is at your back.", ("backward", "down")),
        ("ALERT: battery at 9 percent. Land on the pad ahead.", ()),
        (
            "[E] The drone was given plan mf(150);tp();, but it hit a failure because the ceiling is "
            "40 cm above you. Execution history: mf(100)",
            ("up",),
        ),
        ("[E] The plan mu(100);mf(200); failed: a cable hangs under the drone. Already executed: mu(60)", ("down",)),
    ],
)
def test_an_alert_places_its_hazard(text, directions):
    assert hazard_directions(text) == directions


@pytest.mark.parametrize(
    "text, unsafe",
    [
        ("ALERT: a wall is 20 cm ahead.", ("forward", "toward")),
        (
            "[E] The drone was given plan g('table');tp();, but it hit a failure because a aerial robot is "
            "approaching the drone. Execution history: g('table')",
            ("toward",),
        ),
        ("ALERT: a person is 20 cm from the propellers. Move to a safe distance.", ("toward",)),
        ("ALERT: the shelf is 2 m from the door.", ()),  # near something else
        ("ALERT: a dog is running straight at you!", ("toward",)),
        ("ALERT: g('cup') failed: the cup left the camera view.", ()),  # nothing near: flying to the cup is the retry
    ],
)
def test_the_moves_an_alert_rules_out_first(text, unsafe):
    assert unsafe_first_moves(text) == unsafe


def test_the_account_leaves_out_plans_and_history():
    text = "[E] The drone was given plan ml(50);mf(80);, but it failed because it is dark. Execution history: ml(50)"
    account = alert_account(text)
    assert "ml(50)" not in account and "mf(80)" not in account and "dark" in account
    assert alert_account("ALERT: a wall is ahead. Then fly left.") == "a wall is ahead."


@pytest.mark.parametrize(
    "text, unsafe",
    [
        ("Scene: [sprinkler]. Problem: the sprinkler is only 10 cm above your props. Come down 30 cm.", ("up",)),
        ("Scene: [stove]. oops, you're right over the hot stove. go up and away, now", ("down",)),
        ("Scene: [dog]. Look out! a dog is below you. Climb 1 m, then take a photo.", ("down",)),
        ("Scene: [person]. Stop - a person is approaching you! Back off.", ()),
        ("Scene: [cup]. The cup is on your left. Fly to it.", None),  # where a thing is: no warning
        ("Scene: [cup]. Careful: put the cup in the box on your left.", None),  # a warning word, no hazard
        ("Scene: [window]. Stop at the window on your left.", None),  # "stop" the verb
        ("Scene: [lamp]. Hey robot, fly to the lamp above you.", None),  # a greeting, not a warning
    ],
)
def test_a_warning_in_plain_words_is_an_alert_where_it_places_a_hazard(text, unsafe):
    assert is_warning(text) is (unsafe is not None)
    scope = TaskScope.of_task(text)
    assert scope.alert is (unsafe is not None)
    assert scope.unsafe_first == ((*unsafe, "toward") if unsafe is not None else ())
    assert not TaskScope.of_task(text, hazards=False).alert  # the rule off: a task like any other


def test_a_warnings_first_move_is_not_into_its_hazard():
    drone = load_skill_set("minispec_drone")
    warning = "Scene: [office, sprinkler, desk]. Problem: the sprinkler is only 10 cm above your props. Come down."
    assert check_plan(drone, "md(30);", strict=True, scope=TaskScope.of_task(warning)) is None
    assert check_plan(drone, "mu(100);md(30);", strict=True, scope=TaskScope.of_task(warning)) is not None
    calm = warning.replace("Problem: ", "")
    assert check_plan(drone, "mu(100);md(30);", strict=True, scope=TaskScope.of_task(calm)) is None


DRONE_TASK = "ALERT: a wall is 25 cm in front of you. Scene: [wall, poster]. Get clear of it."


@pytest.mark.parametrize(
    "plan, admitted",
    [
        ("mb(50);", True),
        ("mu(40);mf(100);", True),  # later statements may resume the course
        ("d(1);tp();", True),
        ("mf(50);", False),  # into the wall
        ("mf(20);mb(50);", False),
    ],
)
def test_an_alerts_first_move_is_not_toward_its_hazard(plan, admitted):
    drone = load_skill_set("minispec_drone")
    assert (check_plan(drone, plan, strict=True, scope=TaskScope.of_task(DRONE_TASK)) is None) is admitted
    calm = DRONE_TASK.replace("ALERT: a wall is 25 cm in front of you.", "A wall is 25 cm in front of you.")
    assert check_plan(drone, plan, strict=True, scope=TaskScope.of_task(calm)) is None  # not an alert: any first move


def test_every_hazard_the_corpus_says_is_found_and_its_escape_admitted():
    from llm_planner.tuning import corpus

    rng = random.Random(0)
    drone = load_skill_set("minispec_drone")
    away_moves = {
        "back": "backward",
        "forward": "forward",
        "left": "left",
        "right": "right",
        "up": "up",
        "down": "down",
    }
    move_call = {skill.moves: skill.abbr for skill in drone.spec.skills if skill.moves in away_moves.values()}
    found = 0
    for _ in range(300):
        hazard, away = corpus._hazard(rng)
        where = hazard_directions(f"ALERT: {hazard}.")
        alert = f"ALERT: {hazard}. Scene: [wall, lamp]. Get clear of it."
        unsafe = unsafe_first_moves(alert)
        assert "toward" in unsafe, hazard  # a hazard close by: no flight toward any object
        escape = move_call[away_moves[away]]
        assert check_plan(drone, f"{escape}(50);", strict=True, scope=TaskScope.of_task(alert)) is None, hazard
        if "approaching you" in hazard or "at you" in hazard or "toward you" in hazard:
            assert where == ()  # no place, only a heading
            continue
        assert len(where) == 1 and away_moves[away] != where[0], hazard
        into = move_call[where[0]]
        assert check_plan(drone, f"{into}(50);", strict=True, scope=TaskScope.of_task(alert)) is not None, hazard
        found += 1
    assert found > 200


@pytest.mark.parametrize(
    "plan, admitted",
    [
        ("g('drone');", False),  # toward what the alert warns of
        ("g('lamp');", False),  # which way that goes is not known
        ("tc(90);g('lamp');", True),  # turning stays put
        ("md(40);g('drone');", True),
    ],
)
def test_an_alert_that_places_a_hazard_opens_with_no_flight_toward_an_object(plan, admitted):
    task = "ALERT: another drone is hovering 40 cm above you. Scene: [drone, lamp]. Keep your distance."
    drone = load_skill_set("minispec_drone")
    assert (check_plan(drone, plan, strict=True, scope=TaskScope.of_task(task)) is None) is admitted
    lost = "ALERT: g('drone') failed: the drone is not in view. Scene: [drone, lamp]. Fly to it."
    assert check_plan(drone, "g('drone');", strict=True, scope=TaskScope.of_task(lost)) is None  # places nothing


def test_an_arm_may_reach_for_what_its_alert_names():
    task = "ALERT: the cup slid off the tray to your left. Scene: [cup, tray]. Put it back."
    plan = "g('cup');pk('cup');g('tray');dr('tray');"
    assert check_plan(load_skill_set("minispec_arm"), plan, strict=True, scope=TaskScope.of_task(task)) is None


def test_the_rule_can_be_turned_off_to_measure_it():
    from llm_planner.planning.prompts import plan_request

    drone = load_skill_set("minispec_drone")
    assert check_plan(drone, "mf(50);", strict=True, scope=TaskScope.of_task(DRONE_TASK, hazards=False)) is None
    with_rule, without = (plan_request("t", drone, DRONE_TASK, alert_hazards=on).grammar for on in (True, False))
    assert with_rule != without


def test_a_gate_that_leaves_no_safe_first_action_still_has_a_grammar():
    from llm_planner.catalog.safety import SafetyRules, restricted

    drone = load_skill_set("minispec_drone")
    gated = restricted(drone, SafetyRules.of(drone, allow=["move_forward", "move_backward", "goto"]))
    task = "ALERT: a wall is 20 cm ahead and a pole is 20 cm behind you. Scene: [wall]. Get clear."
    assert check_plan(gated, "mb(50);", strict=True, scope=TaskScope.of_task(task)) is None  # the gate stops it later
