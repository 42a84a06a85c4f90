"""The hold/stream decision (dispatch/release.py): when generated segments go to the robot."""

import dataclasses

import pytest

from llm_planner.dispatch.release import Outlook, best_hold, release_utility
from llm_planner.domain.tuf import Tuf

NORMAL = Tuf(1.0, 1.0, 1.5)


def outlook(now=0.5, robot_free=float("-inf"), held=(2.0,), ahead=(0.3, 0.3), ahead_exec=2.0, first=True, ref=0.0,
            gap=0.0):
    return Outlook(now_s=now, robot_free_s=robot_free, held_exec_s=list(held), ahead_gen_s=list(ahead),
                   ahead_exec_s=ahead_exec, switch_gap_s=gap, first_tuf=NORMAL if first else NORMAL.resumed(),
                   first_ref_s=ref, resumed_tuf=NORMAL.resumed())


def test_a_fast_engine_streams_every_segment_at_once():
    # a 2 s call, the next segments 0.3 s away: the robot never waits
    o = outlook()
    assert best_hold(o) == 0
    assert release_utility(o, 0) == pytest.approx(3.0)


def test_a_lost_first_unit_is_held_until_the_robot_will_not_wait_again():
    # the first unit's response is past the cutoff whenever it goes; quick calls (0.1 s) and
    # 1 s per segment: streaming now would cost each later unit its utility, holding costs nothing
    o = outlook(now=3.0, held=(0.1,), ahead=(1.0, 1.0, 1.0), ahead_exec=0.1)
    assert release_utility(o, 0) == pytest.approx(0.0)
    assert best_hold(o) == 3
    assert release_utility(o, 3) == pytest.approx(3.0)


def test_an_on_time_first_unit_is_not_given_up_for_a_small_later_wait():
    # now: full TUF_0; holding one more segment (0.8 s) would lose it; streaming costs only
    # part of the next unit (a 0.1 s wait)
    o = outlook(now=0.5, held=(0.7,), ahead=(0.8,), ahead_exec=1.0)
    assert best_hold(o) == 0
    assert release_utility(o, 0) > release_utility(o, 1)


def test_a_busy_robot_gets_the_segment_at_once():
    # later unit, robot busy for 5 s more: sending now cannot make it wait
    o = outlook(now=10.0, robot_free=15.0, held=(0.001,), ahead=(1.0, 1.0), ahead_exec=0.001, first=False, ref=15.0)
    assert best_hold(o) == 0


def test_one_long_wait_beats_many_short_ones():
    """Waits of 0.6 s before each of three quick calls lose three units; held, the robot waits
    once (this unit, whose wait has already cost it everything) and then never."""
    o = outlook(now=20.0, robot_free=19.0, held=(0.01,), ahead=(0.6, 0.6, 0.6), ahead_exec=0.01, first=False, ref=19.0)
    assert release_utility(o, 0) < 1.0
    assert best_hold(o) == 3


def test_ties_release_now_and_nothing_held_is_nothing_to_decide():
    assert best_hold(outlook(held=())) == 0
    # no segment to come: nothing to wait for
    assert best_hold(outlook(ahead=())) == 0


def test_a_call_whose_time_spreads_widely_is_priced_over_its_spread():
    """A lost first unit, a scan of 6.9 s on average (1.5 to 12 s) and the next segment 6 s
    away: at the mean the robot never waits, so streaming costs nothing; over the spread it
    finishes first and waits past the cutoff two times in five, so the scan waits for it."""
    at_mean = outlook(now=3.0, held=(6.9,), ahead=(6.0,), ahead_exec=6.9)
    assert best_hold(at_mean) == 0 and release_utility(at_mean, 0) == pytest.approx(1.0)
    spread = dataclasses.replace(at_mean, exec_spread=(0.38, 0.7, 1.0, 1.3, 1.62))
    assert release_utility(spread, 0) == pytest.approx(0.6)
    assert best_hold(spread) == 1 and release_utility(spread, 1) == pytest.approx(1.0)


def test_the_robots_switch_gap_makes_fewer_dispatches_worth_it():
    """A lost first unit and an engine that keeps ahead of the robot: without a switch gap,
    streaming costs nothing; with 50 ms seen between dispatches, each separate one costs 10%
    of a unit, so the units go out together at the end."""
    o = outlook(now=3.0, held=(2.0,), ahead=(0.3, 0.3, 0.3), ahead_exec=2.0)
    assert best_hold(o) == 0 and release_utility(o, 0) == pytest.approx(3.0)
    gapped = outlook(now=3.0, held=(2.0,), ahead=(0.3, 0.3, 0.3), ahead_exec=2.0, gap=0.05)
    assert release_utility(gapped, 0) == pytest.approx(3.0 - 3 * 0.1)
    assert best_hold(gapped) == 3 and release_utility(gapped, 3) == pytest.approx(3.0)


def _record_with_two_segments(second_dispatched_s):
    from llm_planner.catalog.skills import load_skill_set
    from llm_planner.domain.tasks import DispatchedSegment, TaskRecord, TaskRequest

    drone = load_skill_set("minispec_drone")
    record = TaskRequest("t", "r", "tello", "Scene: [door]. Fly.", "normal", NORMAL, 0.0)
    record = TaskRecord(record)
    for index, (text, at) in enumerate((("mf(50);", 0.0), ("tc(90);", second_dispatched_s))):
        calls = drone.find_calls(text)
        record.segments.append(DispatchedSegment(index, text, calls, [1], index == 1, at))
    return record


def test_the_dispatcher_learns_the_switch_gap_of_queued_segments():
    from llm_planner.catalog.exec_model import load_exec_model
    from llm_planner.dispatch.dispatcher import Dispatcher, RobotWork

    dispatcher = Dispatcher(robots=None, on_executing=None)
    work = RobotWork(load_exec_model("tello"), "min", outstanding=2)
    record = _record_with_two_segments(second_dispatched_s=1.0)  # queued while the first ran
    dispatcher.started(record, work, 0, 0.5)
    dispatcher.finished(record, work, 0, [2.0], 2.5)
    dispatcher.started(record, work, 1, 2.55)  # 50 ms after the first one's calls ended
    dispatcher.finished(record, work, 1, [1.5], 4.05)
    assert dispatcher.switch_gap_s == pytest.approx(0.2 * 0.05)
    # a segment sent after the robot had finished: its wait is the planner's, not a switch
    late = _record_with_two_segments(second_dispatched_s=3.0)
    dispatcher.started(late, work, 0, 0.5)
    dispatcher.finished(late, work, 0, [2.0], 2.5)
    dispatcher.started(late, work, 1, 3.1)
    dispatcher.finished(late, work, 1, [1.5], 4.6)
    assert dispatcher.switch_gap_s == pytest.approx(0.2 * 0.05)


def test_a_robot_that_has_not_reported_its_end_is_not_expected_free_yet():
    from llm_planner.catalog.exec_model import load_exec_model
    from llm_planner.catalog.skills import load_skill_set
    from llm_planner.dispatch.dispatcher import RobotWork

    work = RobotWork(load_exec_model("tello"), "min")
    calls = load_skill_set("minispec_drone").find_calls("mf(50);")
    work.sent(calls, 10.0)
    assert work.free_s < work.mean_free_s  # by the minimum vs by the mean
    assert work.expected_free_s(10.5) == pytest.approx(work.mean_free_s)
    assert work.expected_free_s(20.0) == 20.0  # overdue but not reported: still busy
    work.finished(20.5, was_last=True)
    assert work.expected_free_s(30.0) == 20.5  # reported: free since then

