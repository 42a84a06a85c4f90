"""The planner's messages and the core's types, converted in one place."""

from __future__ import annotations

import dataclasses

from llm_planner.domain.tasks import StatusUpdate
from llm_planner.planning.intake import TaskFields
from llm_planner_interfaces.msg import Task, TaskStatus


def task_message(task: TaskFields) -> Task:
    return Task(**dataclasses.asdict(task))


def task_fields(msg: Task, task_id: str | None = None) -> TaskFields:
    """`task_id`: the id to use instead of the message's (the node names tasks sent without one)."""
    return TaskFields(
        task_id or msg.task_id, msg.robot_id, msg.instruction, msg.urgency, msg.beta, msg.ert_s, msg.cutoff_s
    )


def status_message(update: StatusUpdate, stamp) -> TaskStatus:
    return TaskStatus(
        task_id=update.task_id,
        robot_id=update.robot_id,
        state=int(update.state),
        segment_index=max(0, int(update.segment_index)),
        segment_text=update.segment_text,
        message=update.message,
        response_time_s=float(update.response_time_s),
        waiting_time_s=float(update.waiting_time_s),
        utility=float(update.utility),
        stamp=stamp,
    )
