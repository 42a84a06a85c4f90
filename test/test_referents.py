"""Which of several numbered objects of one kind a task's place and size words mean."""

import pytest

from llm_planner.catalog.referents import unmeant
from llm_planner.catalog.scene import parse_task_text

# Three cups in a row, left to right, far to near, small to large; a saucer on each side.
CUPS = ("Scene: [cup_1 x:0.20 y:0.20 width:0.05 height:0.05, cup_2 x:0.50 y:0.50 width:0.08 height:0.08, "
        "cup_3 x:0.80 y:0.80 width:0.12 height:0.12, saucer_1 x:0.10 y:0.90 width:0.10 height:0.10, "
        "saucer_2 x:0.90 y:0.10 width:0.10 height:0.10, tray x:0.50 y:0.10 width:0.30 height:0.10], Task: [A] ")


def _ruled_out(instruction: str, scene: str = CUPS) -> set[str]:
    return set(unmeant(parse_task_text(scene + instruction)))


@pytest.mark.parametrize("instruction, meant", [
    ("Put the leftmost cup on the tray.", "cup_1"),
    ("Put the cup on the left on the tray.", "cup_1"),
    ("Grab the cup that is furthest to the right.", "cup_3"),
    ("take the cup farther left", "cup_1"),
    ("take the cup nearest to you", "cup_3"),
    ("The farthest cup goes on the tray.", "cup_1"),
    ("Move the smallest of the three cups onto the tray.", "cup_1"),
    ("Pick up the biggest cup.", "cup_3"),
    ("Take the cup in the middle.", "cup_2"),
    ("Which cup is the largest? Say its name.", "cup_3"),
])
def test_a_place_or_size_word_singles_out_one_of_a_kind(instruction, meant):
    assert _ruled_out(instruction) == {"cup_1", "cup_2", "cup_3"} - {meant}


def test_each_word_goes_to_the_noun_it_describes():
    # "left" describes the saucer, not the cup before it: the cup is not narrowed.
    assert _ruled_out("Put the cup_2 on the left saucer.") == {"saucer_2"}
    assert _ruled_out("Put the far cup onto the near saucer.") == {"cup_2", "cup_3", "saucer_2"}
    # Two mentions of one kind that mean two of them leave those two.
    assert _ruled_out("Put the leftmost cup and then the rightmost cup on the tray.") == {"cup_2"}


@pytest.mark.parametrize("instruction", [
    "Put all three cups on the tray.",  # a mention without a place word means any of them
    "Put the left cup on the tray, then the other cups.",
    "Put every cup except the left one on the tray.",  # negated or excepted: left to the plan
    "Don't touch the cup on the right; put the others on the tray.",
    "Put the cup right next to the tray.",  # "right" is no side here
    "Put the cup back on the tray.",  # nor is "back" a place
    "Put cup_1 on the tray.",  # named outright
    "Put the medium cup on the tray.",  # no word the resolver knows
])
def test_nothing_is_ruled_out_where_the_words_do_not_settle_it(instruction):
    assert _ruled_out(instruction) == set()


def test_it_needs_boxes_and_a_clear_winner():
    no_boxes = "Scene: [cup_1, cup_2, tray]. "
    assert _ruled_out("Take the left cup.", no_boxes) == set()
    level = ("Scene: [box_1 x:0.20 y:0.50 width:0.10 height:0.10, box_2 x:0.80 y:0.50 width:0.10 height:0.10], "
             "Task: [A] ")
    assert _ruled_out("Take the bigger box.", level) == set()  # the same size
    assert _ruled_out("Take the box in the middle.", level) == set()  # two have no middle
    assert _ruled_out("Take the left one.", level) == {"box_2"}  # "one" where one kind is numbered
    # The wider box is not the larger one: which is bigger is a matter of opinion.
    wide = ("Scene: [box_1 x:0.20 y:0.50 width:0.20 height:0.05, box_2 x:0.80 y:0.50 width:0.15 height:0.15], "
            "Task: [A] ")
    assert _ruled_out("Take the bigger box.", wide) == set()


def test_the_plan_grammar_leaves_out_what_the_words_rule_out():
    pytest.importorskip("xgrammar")
    from llm_planner.catalog.grammar import TaskScope, check_plan
    from llm_planner.catalog.skills import load_skill_set

    task = CUPS + "Put the rightmost cup on the tray."
    scope = TaskScope.of_task(task)
    assert "cup_1" not in scope.objects and "cup_3" in scope.objects and "saucer_1" in scope.objects
    arm = load_skill_set("minispec_arm")
    assert check_plan(arm, "g('cup_3');pk('cup_3');g('tray');dr('tray');", strict=True, scope=scope) is None
    assert check_plan(arm, "g('cup_1');pk('cup_1');g('tray');dr('tray');", strict=True, scope=scope) is not None
