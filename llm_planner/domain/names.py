"""Names that the planner, its robots and every front end agree on: the planner's topics, a
robot's action and node, and the ids LRTrace gives the robots and tasks of a workload."""

from __future__ import annotations

import re

TASKS_TOPIC = "/llm_planner/tasks"
STATUS_TOPIC = "/llm_planner/status"
VIEW_TOPIC = "/llm_planner/view"  # the live view's channels, for recorders (one ViewMessage each)
PLAN_TASK_ACTION = "/llm_planner/plan_task"  # a task as an action: feedback, result, cancel
SET_URGENCY_SERVICE = "/llm_planner/set_urgency"
LIST_TASKS_SERVICE = "/llm_planner/list_tasks"
CANCEL_TASK_SERVICE = "/llm_planner/cancel_task"
APPROVE_SERVICE = "/llm_planner/approve"


def execute_segment_action(robot_id: str) -> str:
    """The robot's ExecuteSegment action: its id is a namespace."""
    return f"/{robot_id}/execute_segment"


def robot_server_node(robot_id: str) -> str:
    return f"{robot_id}_server"


def agent_robot_id(agent: int) -> str:
    """The robot that plays a workload's agent."""
    return f"agent{agent:02d}"


def job_task_id(job_id: int) -> str:
    """The task id of a workload's job."""
    return f"job{job_id}"


_FOLLOW_UP = re.compile(r"^(?P<root>.+)-replan(?P<n>\d+)$")  # follow_up_task_id's form


def follow_up_task_id(root_task_id: str, attempt: int) -> str:
    """The planner's `attempt`-th error follow-up of a task."""
    return f"{root_task_id}-replan{attempt}"


def next_follow_up_id(task_id: str) -> str:
    """The id the error follow-up of `task_id` gets, should its robot fail a call of it."""
    match = _FOLLOW_UP.match(task_id)
    return follow_up_task_id(match["root"], int(match["n"]) + 1) if match else follow_up_task_id(task_id, 1)
