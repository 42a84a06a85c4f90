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
The held units' execution is priced over its spread, not at its mean: a TUF clamps, so the
utility at the mean execution time is not the expected utility (a scan that takes 1.5 to
12 s, 6.9 s on average, looks covered by a next segment due in 6 s, while the robot often
finishes first and waits for it). Each separate dispatch also costs the robot's switch gap
(the wait seen between two dispatches even when the second was queued: zero in simulation,
milliseconds over ROS 2 on a busy machine), which favours fewer, larger dispatches when the
first unit's utility is lost anyway. The decision is taken again at every segment boundary,
with what has been generated since.

An alert's first unit is held as any other's: holding delays it only where that unit's
utility is lost anyway and streaming would leave the robot waiting before the later units,
which acting on the first call alone would then lose.
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
    # The held units' execution time at equally likely quantiles, as multiples of
    # `held_exec_s` (the mean): the expected utility averages over them.
    exec_spread: tuple[float, ...] = (1.0,)


# Midpoints of five equally likely bins of a call's execution time, in percent (`exec_spread`).
EXEC_PERCENTILES = (10, 30, 50, 70, 90)


def release_utility(o: Outlook, hold_for: int) -> float:
    """Expected utility of the held units and the segments to come if the held units go to
    the robot once `hold_for` more segments are generated."""
    return sum(_utility_at(o, hold_for, scale) for scale in o.exec_spread) / len(o.exec_spread)


def _utility_at(o: Outlook, hold_for: int, exec_scale: float) -> float:
    """`release_utility` with the held units taking `exec_scale` times their mean."""
    release_s = o.now_s + sum(o.ahead_gen_s[:hold_for])
    start = max(release_s, o.robot_free_s + o.switch_gap_s if o.robot_free_s > o.now_s else o.robot_free_s)
    units = len(o.held_exec_s) + hold_for
    utility = o.first_tuf.utility(start - o.first_ref_s) + o.resumed_tuf.beta * (units - 1)
    robot_free = start + exec_scale * sum(o.held_exec_s) + hold_for * o.ahead_exec_s
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
    if not o.held_exec_s:
        return 0
    best, best_utility = 0, release_utility(o, 0)
    margin = HOLD_MARGIN * o.resumed_tuf.beta
    for hold_for in range(1, len(o.ahead_gen_s) + 1):
        utility = release_utility(o, hold_for)
        if utility > best_utility + margin:
            best, best_utility = hold_for, utility
    return best
