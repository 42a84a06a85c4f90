"""What an operator may do to a running planner: change a task's urgency, see the queue."""

import pytest
from driven import Driven

from llm_planner.domain.tasks import TaskRequest, TaskState
from llm_planner.domain.tuf import Tuf
from llm_planner.planning.intake import urgency_tuf

NORMAL = Tuf(1, 1, 1.5)


def normal_task(task_id: str, robot: str) -> TaskRequest:
    return TaskRequest(task_id, robot, "tello", "Scene: [door]. Fly forward.", "normal", NORMAL, 0.0, "mf(50);tp();")


def test_a_normal_task_raised_to_urgent_overtakes_the_queue(config, tokenizer):
    driven = Driven(config, tokenizer)
    for n in range(6):
        driven.planner.submit(normal_task(f"t{n}", f"drone{n}"))
    assert list(driven.planner.queue_places()) == [f"t{n}" for n in range(6)]
    level, tuf = urgency_tuf(config, 1)
    assert driven.planner.change_tuf("t5", level, tuf) == ""
    places = driven.planner.queue_places()
    assert places["t5"][0] == 1 and places["t5"][1] > places["t0"][1]
    driven.run()
    assert driven.first(TaskState.GENERATING)[0] == "t5"
    record = driven.planner.records["t5"]
    assert record.request.urgency_name == "urgent" and record.max_utility == record.units_executed * tuf.beta
    assert all(driven.planner.records[f"t{n}"].state == TaskState.SUCCEEDED for n in range(6))


def test_a_running_task_takes_its_new_tuf_for_what_it_has_left(config, tokenizer):
    """Raised while its first segment is generated, a task's later units earn by the urgent TUF."""
    driven = Driven(config, tokenizer, max_batch=4)
    driven.planner.submit(normal_task("long", "drone0"))
    driven.planner.step()  # admitted: it is generating
    level, tuf = urgency_tuf(config, 1)
    assert driven.planner.change_tuf("long", level, tuf) == ""
    gen = driven.planner.generations[0]
    assert gen.entry.tuf.beta == tuf.beta and gen.deadline_s == pytest.approx(tuf.ert_s)
    driven.run()
    assert driven.planner.records["long"].max_utility == 2 * tuf.beta


def test_changing_an_unknown_or_ended_task_says_why(config, tokenizer):
    driven = Driven(config, tokenizer)
    driven.planner.submit(normal_task("done", "drone0"))
    driven.run()
    level, tuf = urgency_tuf(config, 1)
    assert driven.planner.change_tuf("done", level, tuf) == "task 'done' has ended (SUCCEEDED)"
    assert driven.planner.change_tuf("nobody", level, tuf) == "no task 'nobody'"
    with pytest.raises(ValueError, match="urgency 7 out of range"):
        urgency_tuf(config, 7)
    with pytest.raises(ValueError, match="cutoff_s"):
        urgency_tuf(config, 0, beta=2.0, ert_s=1.0, cutoff_s=0.5)
    assert urgency_tuf(config, 0, beta=3.0, ert_s=0.5, cutoff_s=2.0) == ("normal", Tuf(3.0, 0.5, 2.0))
