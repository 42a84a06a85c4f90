"""NodeExecutor (ros/rclpy_compat.py): every kind of entity a node holds is served, a message's
callbacks and the done callbacks they cause run in one turn and in rclpy's order, tasks that
await a future resume when the executor is woken, and new entities are waited on; goals sent
from another thread while it spins (rclpy_compat.send_goal) all get their response there."""

import threading
import time
from contextlib import contextmanager

import pytest
from ros_fixtures import rclpy  # noqa: F401 (skips this module without a ROS 2 workspace)

from llm_planner.ros.rclpy_compat import NodeExecutor

pytestmark = pytest.mark.ros

GOAL_S = 10.0


@pytest.fixture
def ros():
    if not rclpy.ok():
        rclpy.init()
    made = []

    def node(name: str):
        made.append(rclpy.create_node(name, start_parameter_services=False, enable_rosout=False))
        return made[-1]

    yield node
    for each in made:
        each.destroy_node()


@contextmanager
def turning(executor: NodeExecutor, turn_timeout_s: float | None = 0.05):
    """`executor` spinning on a thread of its own while the block runs."""
    stop = threading.Event()

    def spin() -> None:
        while not stop.is_set():
            executor.spin_once(timeout_sec=turn_timeout_s)

    thread = threading.Thread(target=spin)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        executor.wake()
        thread.join()


def wait_for_action_messages(client, context, kinds: tuple[str, ...], timeout_s: float = GOAL_S) -> bool:
    """Wait, without taking anything, until messages of every kind (feedback, status,
    goal_response, cancel_response, result_response) are waiting for the action client."""
    from rclpy.impl.implementation_singleton import rclpy_implementation as _rclpy

    counts = client.get_num_entities()
    wait_set = _rclpy.WaitSet(counts.num_subscriptions, counts.num_guard_conditions, counts.num_timers,
                              counts.num_clients, counts.num_services, counts.num_events, context.handle)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        wait_set.clear_entities()
        client.add_to_wait_set(wait_set)
        wait_set.wait(int(0.1e9))
        client.is_ready(wait_set)  # records which kinds are ready in the client's flags
        if all(getattr(client, f"_is_{kind}_ready") for kind in kinds):
            return True
    return False


def spin_until(executor: NodeExecutor, condition, timeout_s: float = GOAL_S) -> bool:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            return False
        executor.spin_once(timeout_sec=0.1)
    return True


def test_subscriptions_timers_services_and_guard_conditions_are_served(ros):
    from rcl_interfaces.msg import ParameterType, ParameterValue
    from rcl_interfaces.srv import GetParameters
    from std_msgs.msg import String

    node, other = ros("executor_probe"), ros("executor_peer")
    seen: dict[str, object] = {}
    node.create_subscription(String, "/executor_probe/topic", lambda msg: seen.setdefault("message", msg.data), 10)
    node.create_timer(0.05, lambda: seen.setdefault("timer", True))
    guard = node.create_guard_condition(lambda: seen.setdefault("guard", True))

    def answer(request, response):  # any service will do: each name back in capitals
        response.values = [ParameterValue(type=ParameterType.PARAMETER_STRING, string_value=name.upper())
                           for name in request.names]
        return response

    other.create_service(GetParameters, "/executor_probe/answer", answer)
    client = node.create_client(GetParameters, "/executor_probe/answer")
    executor, peer = NodeExecutor(node), NodeExecutor(other)
    try:
        with turning(peer):
            publisher = other.create_publisher(String, "/executor_probe/topic", 10)
            assert client.wait_for_service(timeout_sec=GOAL_S)
            future = client.call_async(GetParameters.Request(names=["x", "y"]))
            guard.trigger()
            assert spin_until(executor, lambda: node.count_publishers("/executor_probe/topic") > 0)
            publisher.publish(String(data="hello"))
            assert spin_until(executor, lambda: future.done() and len(seen) == 3)
        assert [v.string_value for v in future.result().values] == ["X", "Y"]
        assert seen == {"message": "hello", "timer": True, "guard": True}
    finally:
        executor.shutdown()
        peer.shutdown()


def test_an_action_message_and_the_callbacks_it_completes_run_in_one_turn_in_rclpys_order(ros):
    """Feedback and result taken together: the feedback callback first (rclpy runs a
    waitable's own callbacks before the done callbacks its futures schedule), and both in
    the one turn that took them."""
    from action_msgs.msg import GoalStatus
    from rclpy.action import ActionClient, ActionServer

    from llm_planner_interfaces.action import ExecuteSegment

    client_node, server_node = ros("executor_action_client"), ros("executor_action_server")
    release, ended = threading.Event(), threading.Event()

    def execute(goal_handle):
        release.wait(GOAL_S)
        goal_handle.publish_feedback(ExecuteSegment.Feedback(call_index=0, call="takeoff()"))
        goal_handle.succeed()
        ended.set()
        return ExecuteSegment.Result(success=True)

    ActionServer(server_node, ExecuteSegment, "/executor_probe/execute_segment", execute_callback=execute)
    client = ActionClient(client_node, ExecuteSegment, "/executor_probe/execute_segment")
    server, executor = NodeExecutor(server_node), NodeExecutor(client_node)
    order: list[str] = []
    try:
        with turning(server):  # rclpy's action server runs the execute callback as a task
            try:
                assert client.wait_for_server(timeout_sec=GOAL_S)
                goal = client.send_goal_async(ExecuteSegment.Goal(task_id="t", text="takeoff()"),
                                              feedback_callback=lambda fb: order.append("feedback"))
                assert spin_until(executor, goal.done)
                handle = goal.result()
                assert handle.accepted
                result = handle.get_result_async()
                result.add_done_callback(lambda f: order.append("result"))
                release.set()
                assert ended.wait(GOAL_S)
                assert wait_for_action_messages(client, client_node.context, ("feedback", "result_response"))
                executor.spin_once(timeout_sec=0.0)  # one turn
            finally:
                release.set()
        assert order == ["feedback", "result"]
        assert result.result().status == GoalStatus.STATUS_SUCCEEDED
    finally:
        executor.shutdown()
        server.shutdown()


def test_a_task_awaiting_a_future_resumes_when_the_executor_is_woken(ros):
    from rclpy.task import Future

    node = ros("executor_task_probe")
    executor = NodeExecutor(node)
    waited_for, finished = Future(), []

    async def waits():
        finished.append(await waited_for)

    try:
        with turning(executor, turn_timeout_s=None):  # turns only when woken
            executor.create_task(waits)  # from another thread, as rclpy's action server does
            time.sleep(0.2)
            assert finished == []
            waited_for.set_result("done")
            executor.wake()  # rclpy's futures are polled: a task resumes only when its executor turns
            deadline = time.monotonic() + GOAL_S
            while not finished and time.monotonic() < deadline:
                time.sleep(0.01)
        assert finished == ["done"]
    finally:
        executor.shutdown()


def test_an_entity_made_after_the_executor_is_waited_on_and_failures_are_raised_after_the_turn(ros):
    node = ros("executor_growing_node")
    executor = NodeExecutor(node)
    calls: list[str] = []
    first = node.create_guard_condition(lambda: calls.append("first"))
    first.trigger()
    executor.spin_once(timeout_sec=1.0)
    assert calls == ["first"]

    def fails():
        calls.append("fails")
        raise RuntimeError("on purpose")

    late = node.create_guard_condition(fails)  # the wait set needs room for it
    first.trigger()
    late.trigger()
    with pytest.raises(RuntimeError, match="on purpose"):
        executor.spin_once(timeout_sec=1.0)
    assert sorted(calls) == ["fails", "first", "first"]  # the other ready callback ran too
    with pytest.raises(ValueError):
        executor.add_node(ros("executor_second_node"))
    executor.shutdown()


def test_goals_sent_from_another_thread_all_get_their_response_in_the_executors_thread(ros):
    """The planner thread sends a link's goals while the link's executor spins
    (`rclpy_compat.send_goal`). rclpy 9.1's `send_goal_async` registers each goal twice, the
    second time outside the client's lock, so a response the executor took in between was lost
    (one in five runs of a 500-task burst test); and every goal left a future behind."""
    from rclpy.action import ActionClient, ActionServer

    from llm_planner.ros.rclpy_compat import send_goal
    from llm_planner_interfaces.action import ExecuteSegment

    client_node, server_node = ros("send_goal_client"), ros("send_goal_server")

    def execute(goal_handle):
        goal_handle.succeed()
        return ExecuteSegment.Result(success=True)

    ActionServer(server_node, ExecuteSegment, "/send_goal_probe/execute_segment", execute_callback=execute,
                 result_timeout=1)
    client = ActionClient(client_node, ExecuteSegment, "/send_goal_probe/execute_segment")
    server, executor = NodeExecutor(server_node), NodeExecutor(client_node)
    count, responses, all_in = 200, {}, threading.Event()

    def on_response(index: int, future) -> None:
        responses[index] = (threading.get_ident(), future.result().accepted)
        if len(responses) == count:
            all_in.set()

    try:
        with turning(server), turning(executor):
            assert client.wait_for_server(timeout_sec=GOAL_S)
            for index in range(count):
                send_goal(client, ExecuteSegment.Goal(task_id="t", segment_index=index, text="takeoff()"),
                          lambda f, i=index: on_response(i, f))
                if index % 5 == 4:  # bursts of five: the server's request queue is ten deep
                    deadline = time.monotonic() + GOAL_S
                    while len(responses) <= index and time.monotonic() < deadline:
                        time.sleep(0.001)
            assert all_in.wait(GOAL_S), f"{count - len(responses)} of {count} responses lost"
            deadline = time.monotonic() + GOAL_S
            while (client._futures or client._pending_goal_requests) and time.monotonic() < deadline:
                time.sleep(0.01)
        assert {accepted for _, accepted in responses.values()} == {True}
        assert {thread for thread, _ in responses.values()} == {executor._thread} != {threading.get_ident()}
        assert not client._futures and not client._pending_goal_requests and not client._goal_sequence_number_to_goal_id
    finally:
        executor.shutdown()
        server.shutdown()
