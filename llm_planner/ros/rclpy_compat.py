"""rclpy: every use of its private API, in one place, and the version it was written for.

Each workaround says why it is needed and when it can go. Nothing else in the package reaches
into rclpy's private members (test/test_dependencies.py checks), and a different rclpy than
the tested one (settings/versions.py) is reported when this module is first imported, as these
are the first things another version would break; the tests pin each of them."""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from typing import Any, Literal

import numpy as np
from action_msgs.msg import GoalStatus
from rclpy.action import ActionClient, ActionServer
from rclpy.exceptions import InvalidHandle
from rclpy.executors import Executor, ExternalShutdownException
from rclpy.impl.implementation_singleton import rclpy_implementation as _rclpy
from rclpy.node import Node
from rclpy.task import Future, Task
from rclpy.waitable import NumberOfEntities, Waitable

from llm_planner.settings.versions import RCLPY_TESTED, installed_rclpy_version, report_untested_version

log = logging.getLogger(__name__)

RELIES_ON = (
    "private rclpy API (llm_planner/ros/rclpy_compat.py: the executor turn, goal sending, "
    "action results, parameter overrides)"
)


def check_rclpy_version() -> str | None:
    return report_untested_version("ros-rclpy", installed_rclpy_version(), RCLPY_TESTED, RELIES_ON)


check_rclpy_version()  # at the first import: every node of the package starts through this module


# ---------------------------------------------------------------- the executor
# An executor for one node: one turn per message, half the Python of rclpy's per turn.
#
# rclpy's executors are general: each turn filters every entity through its callback group,
# enters each handle in an ExitStack, builds a new wait set, wraps each ready entity in a task
# that triggers the executor's guard condition twice (so the next wait returns at once, only to
# rebuild the set and wait again), and runs a future's done callbacks in yet another turn. That
# is ~90 µs of CPU per turn here (benchmarks/rclpy_costs.py), under the GIL that the planner,
# the engine and every other node of the process need, and a message takes two or three turns.
# The package's nodes each spin in a thread of their own (ros/spin.py) with callbacks that never block,
# so that generality buys nothing: `NodeExecutor` keeps one wait set, refills it from its one
# node's entities (the same rclpy calls), runs what is ready, then the tasks those callbacks
# made (done callbacks, in the order rclpy would run them), all in the same turn.
#
# Everything else is rclpy's: tasks (rclpy's action server runs each goal as one), `wake`, the
# shutdown and Ctrl-C guard conditions, and the `_take_*` helpers for timers, subscriptions,
# clients and services.
# Goes when: rclpy's own executor costs about as little per turn (an EventsExecutor that
# takes guard conditions, or a leaner SingleThreadedExecutor); benchmarks/rclpy_costs.py tells.


# The entity kinds a wait set reports ready ones of (`WaitSet.get_ready_entities`).
_ReadyKind = Literal["subscription", "client", "service", "timer", "guard_condition"]


class NodeExecutor(Executor):
    """Spins one node: `spin_once` waits on its entities, then runs everything that is ready,
    and every task (a coroutine awaiting a future) once more. Exceptions of the callbacks it
    ran are raised after the turn, the first one; the others are logged."""

    def __init__(self, node, *, context=None) -> None:
        super().__init__(context=context or node.context)
        self._node = node
        self._wait_set: _rclpy.WaitSet | None = None
        self._shape: tuple[int, ...] | None = None
        self._failed: list[BaseException] = []
        self._thread: int | None = None  # the thread spinning it
        super().add_node(node)

    def add_node(self, node) -> bool:
        if node is not self._node:
            raise ValueError("a NodeExecutor spins the one node it was made for")
        return False

    def create_task(self, callback, *args, **kwargs) -> Task:
        """rclpy's, except that a task made in the spinning thread during a turn (a done
        callback) runs at the end of that turn, without waking the next wait for nothing."""
        if threading.get_ident() != self._thread:
            return super().create_task(callback, *args, **kwargs)
        task = Task(callback, args, kwargs, executor=self)
        with self._tasks_lock:
            self._tasks.append((task, None, None))
        return task

    def spin_once(self, timeout_sec: float | None = None) -> None:
        self._thread = threading.get_ident()
        self._step_tasks()
        self._raise_failed()
        if self._is_shutdown:
            return
        node = self._node
        in_use: list = []  # entities destroyed by another thread meanwhile are freed when the turn ends
        try:
            subscriptions, timers, clients, services, guards, waitables = (
                self._hold(in_use, entities)
                for entities in (
                    node.subscriptions,
                    node.timers,
                    node.clients,
                    node.services,
                    [*node.guards, self._guard, self._sigint_gc],
                    node.waitables,
                )
            )
            wait_set = self._wait(subscriptions, timers, clients, services, guards, waitables, timeout_sec)
            if self._is_shutdown:
                return
            if not self._context.ok():
                raise ExternalShutdownException()
            ready_waitables = [w for w in waitables if w.is_ready(wait_set)]  # before the set is refilled
            kinds: tuple[tuple[_ReadyKind, list], ...] = (
                ("timer", timers),
                ("subscription", subscriptions),
                ("guard_condition", guards),
                ("client", clients),
                ("service", services),
            )
            ready = {kind: set(wait_set.get_ready_entities(kind)) if entities else set() for kind, entities in kinds}
            for waitable in ready_waitables:
                data = waitable.take_data()
                for future in waitable._futures:  # their done callbacks become tasks, run after execute (as in rclpy)
                    future._set_executor(self)
                self._run(waitable.execute, data)
            for timer in timers:
                if timer.handle.pointer in ready["timer"] and timer.handle.is_timer_ready():
                    self._run_taken(self._take_timer(timer))
            for subscription in subscriptions:
                if subscription.handle.pointer in ready["subscription"]:
                    self._run_taken(self._take_subscription(subscription))
            for guard in guards:
                if guard.handle.pointer in ready["guard_condition"] and guard.callback is not None:
                    self._run(guard.callback)
            for client in clients:
                if client.handle.pointer in ready["client"]:
                    self._run_taken(self._take_client(client))
            for service in services:
                if service.handle.pointer in ready["service"]:
                    self._run_taken(self._take_service(service))
        finally:
            for handle in reversed(in_use):
                handle.__exit__(None, None, None)
        self._step_tasks()  # tasks the callbacks made (done callbacks, a goal's execution)
        self._raise_failed()

    @staticmethod
    def _hold(in_use: list, entities) -> list:
        """The entities still alive, each held in use (as rclpy's executors hold them: a
        destroy waits for the release) and its handle added to `in_use`."""
        alive = []
        for entity in entities:
            if entity is None:
                continue
            handle = entity if isinstance(entity, Waitable) else entity.handle
            try:
                handle.__enter__()
            except InvalidHandle:  # destroyed already
                continue
            in_use.append(handle)
            alive.append(entity)
        return alive

    def _wait(self, subscriptions, timers, clients, services, guards, waitables, timeout_sec) -> _rclpy.WaitSet:
        """Wait on the entities; the wait set, which tells what is ready."""
        counts = NumberOfEntities(len(subscriptions), len(guards), len(timers), len(clients), len(services))
        for waitable in waitables:
            counts += waitable.get_num_entities()
        shape = (
            counts.num_subscriptions,
            counts.num_guard_conditions,
            counts.num_timers,
            counts.num_clients,
            counts.num_services,
            counts.num_events,
        )
        if shape != self._shape:  # rcl wait sets have fixed room: a new entity needs a new set
            context = self._context.handle
            assert context is not None  # an initialised context: rclpy's executors fail otherwise too
            self._wait_set, self._shape = _rclpy.WaitSet(*shape, context), shape
        wait_set = self._wait_set
        assert wait_set is not None  # made at the first wait, as no shape equals None
        wait_set.clear_entities()
        for subscription in subscriptions:
            wait_set.add_subscription(subscription.handle)
        for guard in guards:
            wait_set.add_guard_condition(guard.handle)
        for timer in timers:
            wait_set.add_timer(timer.handle)
        for client in clients:
            wait_set.add_client(client.handle)
        for service in services:
            wait_set.add_service(service.handle)
        for waitable in waitables:
            waitable.add_to_wait_set(wait_set)
        wait_set.wait(-1 if timeout_sec is None or timeout_sec < 0 else int(timeout_sec * 1e9))
        return wait_set

    def _run_taken(self, execute) -> None:
        if execute is not None:  # rclpy's _take_* give None when there was nothing to take after all
            self._run(execute)

    def _run(self, callback, *args) -> None:
        """Run `callback` as a task, once: most end in this one step; one that awaits a pending
        future stays among the executor's tasks and is stepped every turn."""
        task = Task(callback, args, executor=self)
        task()
        if task.done():
            self._note_failure(task)
        else:
            with self._tasks_lock:
                self._tasks.append((task, None, None))

    def _step_tasks(self) -> None:
        """Step every pending task once, and the tasks that stepping makes, until none is new."""
        stepped: set[Task] = set()
        while True:
            with self._tasks_lock:
                if not self._tasks:
                    return
                tasks = [task for task, _, _ in self._tasks if task not in stepped and not task.done()]
            if not tasks:
                break
            for task in tasks:
                stepped.add(task)
                task()
                if task.done():
                    self._note_failure(task)
        with self._tasks_lock:
            self._tasks = [entry for entry in self._tasks if not (entry[0].done() or entry[0].cancelled())]

    def _note_failure(self, task: Task) -> None:
        exception = task.exception()
        if exception is not None:
            self._failed.append(exception)

    def _raise_failed(self) -> None:
        failed, self._failed = self._failed, []
        for extra in failed[1:]:
            log.error("a callback of %s failed too", self._node.get_name(), exc_info=extra)
        if failed:
            raise failed[0]


# ---------------------------------------------------------------- goals from any thread
# Goes when: the rclpy in use carries the fix of ros2/rclpy#1532 (send_goal_async registering
# one future, under the client's lock); then ActionClient.send_goal_async serves.


def send_goal(client: ActionClient, goal, on_response, feedback_callback=None) -> None:
    """Send `goal` on `client` from any thread; `on_response(future)` runs in the client's
    executor thread once the robot accepts or rejects it. rclpy 9.1's `send_goal_async`
    registers a second future for each goal, outside the client's lock, and completes only
    the one it returns (ros2/rclpy#1532, fixed upstream after 9.1): the other stayed with the
    client for good (its executor walks them all whenever the client has data), and a response
    the executor took in between was lost, so goals could only be sent from the executor's
    thread. Here the one future, its callbacks and the feedback callback are all in place
    before the request goes out, and the request is sent and registered under the client's
    lock, under which the executor takes responses."""
    request = client._action_type.Impl.SendGoalService.Request(goal_id=client._generate_random_uuid(), goal=goal)
    if feedback_callback is not None:
        client._feedback_callbacks[bytes(request.goal_id.uuid)] = feedback_callback
    future: Future[Any] = Future()
    future.add_done_callback(client._remove_pending_goal_request)
    future.add_done_callback(on_response)
    with client._lock:
        sequence_number = client._client_handle.send_goal_request(request)
        client._pending_goal_requests[sequence_number] = future
        client._goal_sequence_number_to_goal_id[sequence_number] = request.goal_id
        client.add_future(future)  # the executor ties it to itself: done callbacks run there


# ---------------------------------------------------------------- results kept by the server
# Goes when: rclpy's ActionServer can send a result from the thread that ends a goal and keep
# results for a time apart from how long goals stay listed, and formats goal UUIDs cheaply.


class _KeptResults:
    """Ended goals' results, answered for `kept_s` after the end (oldest first, so expired
    ones are dropped from the front)."""

    def __init__(self, kept_s: float) -> None:
        self.kept_s = kept_s
        self._results: OrderedDict[bytes, tuple[float, object]] = OrderedDict()

    def put(self, goal_id: bytes, response) -> None:
        now = time.monotonic()
        self._results[goal_id] = (now + self.kept_s, response)
        while self._results:
            goal, (until, _) = next(iter(self._results.items()))
            if until > now:
                break
            del self._results[goal]

    def get(self, goal_id: bytes):
        until, response = self._results.get(goal_id, (0.0, None))
        return response if until > time.monotonic() else None


class _HexUuid(np.ndarray):
    """A goal's UUID (uint8[16], as the message has it) that prints as hex. rclpy's action
    server formats each goal's UUID into five debug messages even with debug logging off, and
    numpy's array printing takes ~50 µs each (benchmarks/rclpy_costs.py): 28% of the CPU of a
    bare rclpy client's and server's executor threads (scripts/investigations/profile_ros.py --script
    rclpy_floor.py, docs/results/ros-path/findings/profile-floor.txt), all of it holding the GIL."""

    def __format__(self, spec: str) -> str:
        return self.tobytes().hex()

    def __str__(self) -> str:
        return self.tobytes().hex()

    __repr__ = __str__


class KeptResultsActionServer(ActionServer):
    """rclpy's ActionServer, with results sent by the server's owner as each goal ends and
    answered from its own memory for `result_kept_s` after that.

    - rclpy sends a result from the node's executor after the goal's execute callback returns,
      which takes two more turns of that executor after the robot is done; here the thread
      that ends the goal sends the result to the requests already waiting for it.
    - Every goal in the server's goal list is in each goal status message, which every client
      turns into Python objects entry by entry (~30 µs each): with one robot taking 50 goals a
      second, ended goals listed for 1 s made each hop of the planner's link 1-4 ms slower
      (benchmarks/ros_overhead.py). So an ended goal is listed only `goal_listed_s`, long enough
      for the status message that carries its final state, while a result asked for later (an
      answer lost and asked again, a lagging planner) is still answered from memory.
    - A goal's UUID prints as hex (`_HexUuid`), not through numpy's array printing."""

    def __init__(self, *args, result_kept_s: float, goal_listed_s: float, on_goal_taken=None, **kwargs) -> None:
        # rclpy annotates result_timeout as int; its C binding takes float seconds
        super().__init__(*args, result_timeout=goal_listed_s, **kwargs)  # type: ignore[arg-type]
        self._ended = _KeptResults(max(result_kept_s, 2 * goal_listed_s))  # longer than it is listed
        self._on_goal_taken = on_goal_taken  # called with each goal request the executor takes
        self._asked: dict[bytes, list] = {}  # result requests waiting for their goal's end
        self._results_lock = threading.Lock()

    def take_data(self):
        data = super().take_data()
        if "goal" in data:  # the goal handle keeps this UUID, so its later debug messages are cheap too
            goal_id = data["goal"][1].goal_id
            # Past the field's setter, which makes a plain array again when rosidl's field
            # checks are off.
            goal_id._uuid = goal_id.uuid.view(_HexUuid)
            if self._on_goal_taken is not None:
                self._on_goal_taken(data["goal"][1].goal)
        return data

    def send_result(self, goal_handle, status: int, result) -> None:
        """The owner is done with `goal_handle`, which ends with `status`: answer the requests
        for its result that are waiting, and keep it for later ones."""
        goal_id = bytes(goal_handle.goal_id.uuid)
        response = self._action_type.Impl.GetResultService.Response(status=status, result=result)
        with self._results_lock:
            self._ended.put(goal_id, response)
            waiting = self._asked.pop(goal_id, [])
        for request_header in waiting:
            self._respond(request_header, response)

    async def _execute_get_result_request(self, request_header_and_message) -> None:
        request_header, request = request_header_and_message
        goal_id = bytes(request.goal_id.uuid)
        with self._results_lock:
            response = self._ended.get(goal_id)
            if response is None and goal_id in self._goal_handles:  # not ended yet
                self._asked.setdefault(goal_id, []).append(request_header)
                return
        if response is None:  # never accepted here, or ended longer than result_kept_s ago
            response = self._action_type.Impl.GetResultService.Response(status=GoalStatus.STATUS_UNKNOWN)
        self._respond(request_header, response)

    def _respond(self, request_header, response) -> None:
        try:
            with self._lock:
                self._handle.send_result_response(request_header, response)
        except Exception:  # noqa: BLE001 -- the client has gone away (rclpy's own servers carry on too)
            self._logger.warning("could not send a result response (the client may have gone away)")


# ---------------------------------------------------------------- parameter overrides
# Goes when: rclpy offers a public accessor for the values given on the command line and in
# params files for a node.


def parameter_overrides(node: Node) -> dict:
    """The command line's and params files' values for `node`: what `declare_parameter`
    applies, so a name among them that the node never declares is a typo."""
    return getattr(node, "_parameter_overrides", {})
