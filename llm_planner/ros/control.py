"""The planner node's control surface: a task as an action (`PlanTask`: feedback, result,
cancel), and services to change a task's urgency, cancel a task and list the tasks.

Callbacks run on the node's executor and never block it: what touches the planner is posted
to the planner's thread (LiveDriver) and awaited as a future that thread completes."""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable, Mapping
from typing import Any

from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.action.server import ServerGoalHandle
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.task import Future

from llm_planner.domain.names import (
    APPROVE_SERVICE,
    CANCEL_TASK_SERVICE,
    LIST_TASKS_SERVICE,
    PLAN_TASK_ACTION,
    SET_URGENCY_SERVICE,
)
from llm_planner.domain.tasks import StatusUpdate, TaskState
from llm_planner.planning.driver import LiveDriver
from llm_planner.planning.intake import Rejection, TaskFields, build_request, urgency_tuf
from llm_planner.planning.planner import Planner
from llm_planner.ros.messages import task_fields
from llm_planner.settings.config import PlannerConfig
from llm_planner_interfaces.action import PlanTask
from llm_planner_interfaces.msg import TaskInfo, TaskStatus
from llm_planner_interfaces.srv import Approve, CancelTask, ListTasks, SetUrgency

log = logging.getLogger(__name__)

CANCELED_BY_CLIENT = "canceled by its action client"
CANCELED_BY_OPERATOR = "canceled by an operator"
NOT_ACTIVE = "planner not active"
NOT_CONFIGURED = "planner not configured (lifecycle state unconfigured)"


class TaskControl:
    def __init__(
        self,
        node,
        config: PlannerConfig,
        robot_types: Mapping[str, str],
        driver: Callable[[], LiveDriver | None],
        clock,
        plans,
        refuse: Callable[[str, str, str], None],
    ) -> None:
        """`node.active`: whether tasks may come in. `driver()`: the planner's thread, None
        while the node is unconfigured. `plans`: the node's recorded plans (the sim engine
        replays them). `refuse(task_id, robot_id, reason)`: a task REJECTED with the reason."""
        self._node = node
        self._config = config
        self._robot_types = robot_types
        self._driver = driver
        self._refuse = refuse
        self._clock = clock
        self._plans = plans
        # task id -> (goal handle, its final status)
        self._goals: dict[str, tuple[ServerGoalHandle[Any, Any, Any], Future[TaskStatus]]] = {}
        self._queued: set[str] = set()  # goals' tasks the planner took in
        self._task_of_goal: dict[bytes, str] = {}  # goal UUID -> its task id, while it runs
        self._ids = itertools.count(1)
        group = ReentrantCallbackGroup()
        self._action = ActionServer(
            node,
            PlanTask,
            PLAN_TASK_ACTION,
            execute_callback=self._execute,
            goal_callback=self._on_goal,
            cancel_callback=self._on_cancel,
            callback_group=group,
        )
        self._services = [
            node.create_service(SetUrgency, SET_URGENCY_SERVICE, self._set_urgency, callback_group=group),
            node.create_service(ListTasks, LIST_TASKS_SERVICE, self._list_tasks, callback_group=group),
            node.create_service(CancelTask, CANCEL_TASK_SERVICE, self._cancel_task, callback_group=group),
            node.create_service(Approve, APPROVE_SERVICE, self._approve, callback_group=group),
        ]

    # ------------------------------------------------------------------ the planner's thread
    def on_status(self, update: StatusUpdate, msg: TaskStatus) -> None:
        """Every status the planner publishes: the goal of its task gets it as feedback, and
        its final one as the result."""
        goal = self._goals.get(update.task_id)
        if goal is None:
            return
        goal_handle, done = goal
        if update.state == TaskState.QUEUED:
            self._queued.add(update.task_id)
        elif update.state == TaskState.REJECTED and update.task_id in self._queued:
            return  # a later task with the same id (from the topic) was refused; this one goes on
        if update.state.terminal:
            del self._goals[update.task_id]
            self._queued.discard(update.task_id)
            self._complete(done, msg)
        elif goal_handle.is_active:
            goal_handle.publish_feedback(PlanTask.Feedback(status=msg))

    def _complete(self, future: Future, value) -> None:
        future.set_result(value)
        if self._node.executor is not None:
            self._node.executor.wake()  # rclpy resumes an awaiting callback only when its executor wakes

    async def _in_planner(self, fn: Callable[[Planner], object]):
        """`fn(planner)` run in the planner's thread, awaited without blocking the executor;
        RuntimeError while there is no planner."""
        driver = self._driver()
        if driver is None:
            raise RuntimeError(NOT_CONFIGURED)
        future: Future[object] = Future()

        def run() -> None:
            try:
                value = fn(driver.planner)
            except Exception as exc:  # noqa: BLE001 -- handed back to the awaiting callback
                value = exc
            self._complete(future, value)

        driver.post(run)
        value = await future
        if isinstance(value, Exception):
            raise value
        return value

    # ------------------------------------------------------------------ PlanTask
    def _fields(self, goal: PlanTask.Goal) -> TaskFields:
        return task_fields(goal.task, goal.task.task_id or f"action-{next(self._ids)}")

    def _on_goal(self, goal: PlanTask.Goal) -> GoalResponse:
        """Bad fields, an unknown robot or a task id in use: rejected now, the reason on
        /llm_planner/status (a goal response carries none)."""
        fields = task_fields(goal.task, goal.task.task_id or "(unnamed)")
        outcome = build_request(fields, config=self._config, robot_types=self._robot_types, arrival_s=0.0)
        reason = outcome.reason if isinstance(outcome, Rejection) else ""
        if not reason and goal.task.task_id and goal.task.task_id in self._goals:
            reason = f"duplicate task_id {goal.task.task_id!r}"
        if not reason and not self._node.active:
            reason = NOT_ACTIVE
        if reason:
            log.warning("PlanTask goal for %s rejected: %s", fields.task_id, reason)
            self._refuse(fields.task_id, fields.robot_id, reason)
            return GoalResponse.REJECT
        return GoalResponse.ACCEPT

    def _on_cancel(self, goal_handle) -> CancelResponse:
        task_id = self._task_of_goal.get(bytes(goal_handle.goal_id.uuid))
        if task_id is None:
            return CancelResponse.REJECT
        driver = self._driver()
        if driver is None:
            return CancelResponse.REJECT

        def cancel() -> None:
            driver.planner.cancel(task_id, CANCELED_BY_CLIENT)

        driver.post(cancel)
        return CancelResponse.ACCEPT

    async def _execute(self, goal_handle) -> PlanTask.Result:
        fields = self._fields(goal_handle.request)
        goal_id = bytes(goal_handle.goal_id.uuid)
        self._task_of_goal[goal_id] = fields.task_id
        done: Future[TaskStatus] = Future()
        self._goals[fields.task_id] = (goal_handle, done)
        outcome = build_request(
            fields,
            config=self._config,
            robot_types=self._robot_types,
            arrival_s=self._clock.now(),
            recorded_plan=self._plans.plan_for(fields.instruction),
            label=self._plans.label_for(fields.instruction),
        )
        driver = self._driver()
        if isinstance(outcome, Rejection):  # checked at goal time already; the same rules
            self._refuse(outcome.task_id, outcome.robot_id, outcome.reason)
        elif driver is None or not self._node.active:  # deactivated since the goal was accepted
            self._refuse(fields.task_id, fields.robot_id, NOT_ACTIVE)
        else:

            def submit() -> None:
                driver.planner.submit(outcome)

            driver.post(submit)
        final: TaskStatus = await done
        del self._task_of_goal[goal_id]
        if final.state == TaskState.SUCCEEDED:
            goal_handle.succeed()
        elif final.state == TaskState.CANCELED and goal_handle.is_cancel_requested:
            goal_handle.canceled()
        else:
            goal_handle.abort()
        return PlanTask.Result(status=final)

    # ------------------------------------------------------------------ services
    async def _set_urgency(self, request: SetUrgency.Request, response: SetUrgency.Response) -> SetUrgency.Response:
        try:
            level, tuf = urgency_tuf(self._config, request.urgency, request.beta, request.ert_s, request.cutoff_s)
        except ValueError as exc:
            response.success, response.message = False, str(exc)
            return response
        try:
            why_not = await self._in_planner(lambda planner: planner.change_tuf(request.task_id, level, tuf))
        except RuntimeError as exc:
            why_not = str(exc)
        response.success = not why_not
        response.message = why_not or (
            f"{request.task_id}: {level}, TUF beta {tuf.beta} ert {tuf.ert_s} s cutoff {tuf.cutoff_s} s"
        )
        return response

    async def _cancel_task(self, request: CancelTask.Request, response: CancelTask.Response) -> CancelTask.Response:
        reason = request.reason or CANCELED_BY_OPERATOR
        try:
            canceled = await self._in_planner(lambda planner: planner.cancel(request.task_id, reason))
            message = "" if canceled else f"no queued or running task {request.task_id!r}"
        except RuntimeError as exc:
            canceled, message = False, str(exc)
        response.success, response.message = bool(canceled), message
        return response

    async def _approve(self, request: Approve.Request, response: Approve.Response) -> Approve.Response:
        try:
            why_not = await self._in_planner(
                lambda planner: planner.approve(request.task_id, request.approve, request.reason)
            )
        except RuntimeError as exc:
            why_not = str(exc)
        response.success, response.message = not why_not, why_not
        return response

    async def _list_tasks(self, request: ListTasks.Request, response: ListTasks.Response) -> ListTasks.Response:
        try:
            response.tasks = await self._in_planner(task_infos)
        except RuntimeError:  # unconfigured: no tasks
            response.tasks = []
        return response


def task_infos(planner: Planner) -> list[TaskInfo]:
    """The tasks the planner works on, the ready queue's order first (in the planner's thread)."""
    places = planner.queue_places()
    waiting = planner.gate.waiting if planner.gate is not None else {}
    rows = []
    for gen in planner.generations:
        record, request = gen.record, gen.record.request
        place, priority = places.get(gen.task_id, (0, 0.0))
        rows.append(
            TaskInfo(
                task_id=request.task_id,
                robot_id=request.robot_id,
                state=int(record.state),
                urgency=request.urgency_name,
                beta=request.tuf.beta,
                ert_s=request.tuf.ert_s,
                cutoff_s=request.tuf.cutoff_s,
                queue_place=place,
                priority=float(priority),
                utility=float(record.utility),
                segments_sent=len(record.segments),
                awaiting_approval=waiting[gen.task_id].call if gen.task_id in waiting else "",
            )
        )
    return sorted(rows, key=lambda r: (r.queue_place == 0, r.queue_place))
