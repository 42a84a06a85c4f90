"""`llm-planner-ctl`: drive a running planner node over ROS 2 (the `ros2` command-line tools
are not on the package registries). Each subcommand is one action or service call:

    llm-planner-ctl submit ROBOT "INSTRUCTION" [--urgency LEVEL] [--task-id ID] [--no-wait]
    llm-planner-ctl cancel TASK_ID [--reason TEXT]
    llm-planner-ctl urgency TASK_ID LEVEL [--tuf BETA ERT CUTOFF]
    llm-planner-ctl list
    llm-planner-ctl approve TASK_ID / deny TASK_ID [--reason TEXT]
    llm-planner-ctl lifecycle {get,configure,activate,deactivate,cleanup,shutdown}

`submit` sends a PlanTask goal, prints each status as feedback and the result; Ctrl-C cancels
the goal. Exit status: 0 when the call did what was asked (a task SUCCEEDED), 1 when the
planner refused or the task did not succeed, 2 for bad arguments or no planner."""

from __future__ import annotations

import argparse
import math
import sys
import time
from typing import TYPE_CHECKING, Any

from llm_planner.domain.names import (
    APPROVE_SERVICE,
    CANCEL_TASK_SERVICE,
    LIST_TASKS_SERVICE,
    PLAN_TASK_ACTION,
    SET_URGENCY_SERVICE,
)
from llm_planner.domain.tasks import TaskState
from llm_planner.planning.intake import urgency_index
from llm_planner.settings.config import load_planner_config

if TYPE_CHECKING:  # rclpy is imported where a call needs it
    from rclpy.client import Client

WAIT_FOR_PLANNER_S = 10.0
# A new process is a new DDS participant. The planner answers a call only once it has matched
# this side's reply reader, and Fast DDS gives up on that after 100 ms ("failed to send
# response (timeout)"); matching trails this side's view of the planner on a busy machine.
MATCH_GRACE_S = 1.0
ANSWER_S = 3.0  # an idempotent call with no answer by then is asked once more


class NoPlanner(RuntimeError):
    pass


class Ctl:
    """One node in a context of its own, to make the calls and wait for their answers."""

    def __init__(self, timeout_s: float = WAIT_FOR_PLANNER_S) -> None:
        import rclpy
        from rclpy.context import Context
        from rclpy.executors import SingleThreadedExecutor

        self._rclpy = rclpy
        self.context = Context()
        rclpy.init(context=self.context)
        self.node = rclpy.create_node("llm_planner_ctl", context=self.context, start_parameter_services=False)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self.timeout_s = timeout_s

    def close(self) -> None:
        self.executor.shutdown()
        self.node.destroy_node()
        self._rclpy.shutdown(context=self.context)

    def settle(self) -> None:
        """Let discovery finish both ways before the first call (MATCH_GRACE_S)."""
        deadline = time.monotonic() + MATCH_GRACE_S
        while time.monotonic() < deadline:
            self.executor.spin_once(timeout_sec=max(0.0, deadline - time.monotonic()))

    def wait(self, future, timeout_s: float | None = None):
        self.executor.spin_until_future_complete(future, timeout_sec=timeout_s)
        if not future.done():
            raise NoPlanner("no answer from the planner")
        return future.result()

    def call(self, srv_type, name: str, request, idempotent: bool = True):
        """The service's answer; an idempotent call without one in ANSWER_S is made again."""
        client: Client[Any, Any] = self.node.create_client(srv_type, name)
        if not client.wait_for_service(timeout_sec=self.timeout_s):
            raise NoPlanner(f"no service {name} (is the planner node running, with ROS_DOMAIN_ID as here?)")
        self.settle()
        if idempotent:
            future = client.call_async(request)
            self.executor.spin_until_future_complete(future, timeout_sec=ANSWER_S)
            if future.done():
                return future.result()
            client.remove_pending_request(future)
        return self.wait(client.call_async(request), self.timeout_s)


def _urgency_index(level: str, config) -> int:
    """An urgency level given by index or by name."""
    return int(level) if level.isdigit() else urgency_index(config, None, level)


def _state(value: int) -> str:
    return TaskState(value).name


def _describe(status) -> str:
    parts = [f"{status.task_id} {_state(status.state)}"]
    if status.segment_text:
        parts.append(f"segment {status.segment_index}: {status.segment_text}")
    if status.message:
        parts.append(status.message)
    if math.isfinite(status.utility):
        parts.append(
            f"utility {status.utility:.3f}, response {status.response_time_s:.3f} s, "
            f"waiting {status.waiting_time_s:.3f} s"
        )
    return "  ".join(parts)


def submit(ctl: Ctl, args, config) -> int:
    from rclpy.action import ActionClient

    from llm_planner_interfaces.action import PlanTask
    from llm_planner_interfaces.msg import Task

    tuf = args.tuf or (0.0, 0.0, 0.0)
    goal = PlanTask.Goal(
        task=Task(
            task_id=args.task_id or "",
            robot_id=args.robot,
            instruction=args.instruction,
            urgency=_urgency_index(args.urgency, config),
            beta=tuf[0],
            ert_s=tuf[1],
            cutoff_s=tuf[2],
        )
    )
    client: ActionClient[Any, Any, Any] = ActionClient(ctl.node, PlanTask, PLAN_TASK_ACTION)
    if not client.wait_for_server(timeout_sec=ctl.timeout_s):
        raise NoPlanner(f"no action {PLAN_TASK_ACTION} (is the planner node running and active?)")
    ctl.settle()
    handle = ctl.wait(
        client.send_goal_async(goal, feedback_callback=lambda f: print(_describe(f.feedback.status), flush=True)),
        ctl.timeout_s,
    )
    if not handle.accepted:
        print("rejected: the reason is on /llm_planner/status and in the planner's log", file=sys.stderr)
        return 1
    if args.no_wait:
        print("accepted")
        return 0
    result_future = handle.get_result_async()
    try:
        result = ctl.wait(result_future)
    except KeyboardInterrupt:
        print("canceling ...", file=sys.stderr)
        ctl.wait(handle.cancel_goal_async(), ctl.timeout_s)
        result = ctl.wait(result_future, ctl.timeout_s)
    print(_describe(result.result.status))
    return 0 if result.result.status.state == TaskState.SUCCEEDED else 1


def cancel(ctl: Ctl, args, config) -> int:
    from llm_planner_interfaces.srv import CancelTask

    answer = ctl.call(
        CancelTask,
        CANCEL_TASK_SERVICE,
        CancelTask.Request(task_id=args.task_id, reason=args.reason or ""),
        idempotent=False,
    )
    print("canceled" if answer.success else f"not canceled: {answer.message}")
    return 0 if answer.success else 1


def urgency(ctl: Ctl, args, config) -> int:
    from llm_planner_interfaces.srv import SetUrgency

    tuf = args.tuf or (0.0, 0.0, 0.0)
    answer = ctl.call(
        SetUrgency,
        SET_URGENCY_SERVICE,
        SetUrgency.Request(
            task_id=args.task_id, urgency=_urgency_index(args.level, config), beta=tuf[0], ert_s=tuf[1], cutoff_s=tuf[2]
        ),
    )
    print(answer.message if answer.success else f"not changed: {answer.message}")
    return 0 if answer.success else 1


def list_tasks(ctl: Ctl, args, config) -> int:
    from llm_planner_interfaces.srv import ListTasks

    answer = ctl.call(ListTasks, LIST_TASKS_SERVICE, ListTasks.Request())
    print(
        f"{'place':>5}  {'task':<16} {'robot':<10} {'state':<10} {'urgency':<8} {'priority':>10} "
        f"{'utility':>8} {'sent':>4}  awaiting approval"
    )
    for t in answer.tasks:
        place = str(t.queue_place) if t.queue_place else "-"
        print(
            f"{place:>5}  {t.task_id:<16} {t.robot_id:<10} {_state(t.state):<10} {t.urgency:<8} "
            f"{t.priority:>10.3f} {t.utility:>8.3f} {t.segments_sent:>4}  {t.awaiting_approval}".rstrip()
        )
    return 0


def approve(ctl: Ctl, args, config) -> int:
    from llm_planner_interfaces.srv import Approve

    approved = args.command == "approve"
    answer = ctl.call(
        Approve,
        APPROVE_SERVICE,
        Approve.Request(task_id=args.task_id, approve=approved, reason=args.reason or ""),
        idempotent=False,
    )
    print(("approved" if approved else "denied") if answer.success else f"no answer taken: {answer.message}")
    return 0 if answer.success else 1


TRANSITIONS = ("configure", "activate", "deactivate", "cleanup", "shutdown")
TRANSITION_S = 600.0  # configure starts and warms the engine: minutes on a slow CPU


def lifecycle(ctl: Ctl, args, config) -> int:
    """The planner node's lifecycle state, or a transition (by its label) and the state after it."""
    from lifecycle_msgs.msg import Transition
    from lifecycle_msgs.srv import ChangeState, GetState

    node = f"/{args.node}"
    if args.transition != "get":
        client: Client[Any, Any] = ctl.node.create_client(ChangeState, f"{node}/change_state")
        if not client.wait_for_service(timeout_sec=ctl.timeout_s):
            raise NoPlanner(f"no service {node}/change_state (is the planner node running?)")
        ctl.settle()
        answer = ctl.wait(
            client.call_async(ChangeState.Request(transition=Transition(label=args.transition))), TRANSITION_S
        )
        if not answer.success:
            print(f"{args.transition} refused or failed (the node's log says why)")
    state = ctl.call(GetState, f"{node}/get_state", GetState.Request()).current_state
    print(state.label)
    return 0 if args.transition == "get" or answer.success else 1


COMMANDS = {
    "submit": submit,
    "cancel": cancel,
    "urgency": urgency,
    "list": list_tasks,
    "approve": approve,
    "deny": approve,
    "lifecycle": lifecycle,
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="llm-planner-ctl", description=__doc__.splitlines()[0])
    parser.add_argument("--config", help="planner config, for the urgency levels' names (default config/planner.yaml)")
    parser.add_argument(
        "--timeout", type=float, default=WAIT_FOR_PLANNER_S, help="seconds to wait for the planner to answer"
    )
    sub = parser.add_subparsers(dest="command", required=True)
    tuf: dict[str, Any] = dict(type=float, nargs=3, metavar=("BETA", "ERT_S", "CUTOFF_S"), help="a TUF of its own")
    p = sub.add_parser("submit", help="plan a task (PlanTask action): prints its statuses; Ctrl-C cancels it")
    p.add_argument("robot")
    p.add_argument("instruction")
    p.add_argument("--urgency", default="0", help="level name or index (default 0)")
    p.add_argument("--tuf", **tuf)
    p.add_argument("--task-id")
    p.add_argument("--no-wait", action="store_true", help="return once the planner accepted the goal")
    p = sub.add_parser("cancel", help="end a queued or running task CANCELED")
    p.add_argument("task_id")
    p.add_argument("--reason")
    p = sub.add_parser("urgency", help="change a queued or running task's urgency level (or TUF)")
    p.add_argument("task_id")
    p.add_argument("level", help="level name or index")
    p.add_argument("--tuf", **tuf)
    sub.add_parser("list", help="the tasks the planner works on, in ready-queue order")
    for name, what in (
        ("approve", "let a task's call that waits for approval go to its robot"),
        ("deny", "refuse it: the task fails with the reason"),
    ):
        p = sub.add_parser(name, help=what)
        p.add_argument("task_id")
        p.add_argument("--reason")
    p = sub.add_parser("lifecycle", help="the planner node's lifecycle state, or a transition")
    p.add_argument("transition", choices=("get", *TRANSITIONS))
    p.add_argument("--node", default="llm_planner", help="the planner node's name (default llm_planner)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        config = load_planner_config(args.config)
        ctl = Ctl(args.timeout)
    except (ValueError, OSError) as exc:
        print(f"llm-planner-ctl: {exc}", file=sys.stderr)
        return 2
    started = time.monotonic()
    try:
        return COMMANDS[args.command](ctl, args, config)
    except ValueError as exc:
        print(f"llm-planner-ctl {args.command}: {exc}", file=sys.stderr)
        return 2
    except NoPlanner as exc:
        print(f"llm-planner-ctl {args.command}: {exc} after {time.monotonic() - started:.0f} s", file=sys.stderr)
        return 2
    finally:
        ctl.close()


if __name__ == "__main__":
    sys.exit(main())
