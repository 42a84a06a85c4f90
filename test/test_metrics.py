"""Per-task comparison of a live and a simulated run."""

import math

from llm_planner.domain.tasks import TaskRecord, TaskRequest
from llm_planner.domain.tuf import Tuf
from llm_planner.lrtrace.metrics import robot_busy_at_arrival, task_differences


def record(task_id, robot, arrival, finished, response):
    r = TaskRecord(TaskRequest(task_id, robot, "tello", "fly", "normal", Tuf(1, 1, 1.5), arrival))
    r.finished_s, r.response_time_s = finished, response
    return r


def test_the_robot_busy_at_a_tasks_arrival_is_what_its_earlier_tasks_had_left():
    records = [record("a", "r1", 0.0, 10.0, 0.2), record("b", "r1", 4.0, 12.0, 6.1),
               record("c", "r2", 5.0, 7.0, 0.3), record("d", "r1", 13.0, 15.0, 0.2)]
    assert robot_busy_at_arrival(records) == {"a": 0.0, "b": 6.0, "c": 0.0, "d": 0.0}


def test_task_differences_put_the_largest_live_lag_first_with_both_runs_robot_wait():
    live = [record("a", "r1", 0.0, 10.0, 0.2), record("b", "r1", 4.0, 12.0, 6.1), record("c", "r2", 5.0, 7.0, 0.3)]
    sim = [record("a", "r1", 0.0, 3.0, 0.2), record("b", "r1", 4.0, 6.0, 0.2), record("c", "r2", 5.0, 7.0, 0.4)]
    rows = task_differences(live, sim)
    assert [r["task"] for r in rows] == ["b", "a", "c"]
    assert rows[0]["difference_s"] == 6.1 - 0.2
    assert (rows[0]["robot_busy_live_s"], rows[0]["robot_busy_sim_s"]) == (6.0, 0.0)
    assert math.isnan(rows[0]["first_sent_sim_s"])  # records without segments
    rows = task_differences(live, sim, live_first_sent_s={"b": 5.9})
    assert rows[0]["first_sent_live_s"] == 5.9
