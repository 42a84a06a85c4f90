"""When generated segments go to the robot: stream each at once, or hold some back.

The paper's objective (eq. 3) counts a plan's first unit by TUF_0 of its response and every
later unit by TUF_1 of how long the robot waited before it. A TUF clamps at zero, so a wait
costs at most one unit: when the planner cannot keep ahead of a robot (a slow or crowded
engine, quick calls), one long wait before a group of units costs less than many short
waits before each. Streaming every segment at once (the paper) spreads the waits; sending
the whole plan at the end (the vLLM baselines) concentrates them on the first unit.

`best_hold` prices both and everything between by the expected eq. 3 utility of the held
units and the segments still to come: released once `k` more segments are generated, then
each following segment sent as soon as it is generated. A segment still to come is expected
to execute as long as this plan's segments so far did on average (its calls are unknown).
Each separate dispatch also costs the robot's switch gap (the wait seen between two
dispatches even when the second was queued: zero in simulation, milliseconds over ROS 2 on
a busy machine), which favours fewer, larger dispatches when the first unit's utility is lost
anyway. The decision is taken again at every segment boundary, with what has been generated
since.

An alert's first unit is never held (`features.alerts_at_once`, on by default): a task more
important than the least important level (stop, clear the workspace, a replan after a
failure) has its robot act as soon as its first call is generated, even when the unit's
utility is lost anyway and holding would save a later wait. What an alert's first action does
is worth more than the utility it is counted at.
"""

from __future__ import annotations

from dataclasses import dataclass

from llm_planner.domain.tuf import Tuf


@dataclass(frozen=True)
class Outlook:
    """One generation's situation at a segment boundary."""

    now_s: float
    robot_free_s: float  # when the robot finishes what it was sent (<= now: it is idle)
    held_exec_s: list[float]  # predicted execution time of each held unit, in order
    ahead_gen_s: list[float]  # predicted generation time of each segment still to come
    ahead_exec_s: float  # predicted execution time of a segment still to come
    switch_gap_s: float  # what the robot waits between two dispatches even when the second is queued
    first_tuf: Tuf  # the first held unit's TUF: TUF_0 for the plan's first unit, else TUF_1
    first_ref_s: float  # its reference: the task's arrival, or the end of the previous unit
    resumed_tuf: Tuf  # TUF_1, for every unit after it
    alert_at_once: bool = False  # the held units start an alert's plan (above the least important level): send now


def release_utility(o: Outlook, hold_for: int) -> float:
    """Expected utility of the held units and the segments to come if the held units go to
    the robot once `hold_for` more segments are generated."""
    release_s = o.now_s + sum(o.ahead_gen_s[:hold_for])
    start = max(release_s, o.robot_free_s + o.switch_gap_s if o.robot_free_s > o.now_s else o.robot_free_s)
    units = len(o.held_exec_s) + hold_for
    utility = o.first_tuf.utility(start - o.first_ref_s) + o.resumed_tuf.beta * (units - 1)
    robot_free = start + sum(o.held_exec_s) + hold_for * o.ahead_exec_s
    ready = release_s
    for gen_s in o.ahead_gen_s[hold_for:]:
        ready += gen_s
        start = max(ready, robot_free + o.switch_gap_s)
        utility += o.resumed_tuf.utility(start - robot_free)
        robot_free = start + o.ahead_exec_s
    return utility


# Holding must be expected to save at least this fraction of a unit's utility: smaller
# differences are within the timing noise of a live robot port (a few tens of milliseconds
# on TUF_1's slope), and holding delays what the robot does.
HOLD_MARGIN = 0.1


def best_hold(o: Outlook) -> int:
    """How many more segments to hold the held units for (0: release them now). Near-ties go
    to the earlier release: the robot acts sooner at about the same utility."""
    if not o.held_exec_s or o.alert_at_once:
        return 0
    best, best_utility = 0, release_utility(o, 0)
    margin = HOLD_MARGIN * o.resumed_tuf.beta
    for hold_for in range(1, len(o.ahead_gen_s) + 1):
        utility = release_utility(o, hold_for)
        if utility > best_utility + margin:
            best, best_utility = hold_for, utility
    return best
