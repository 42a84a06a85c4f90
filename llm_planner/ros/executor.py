"""An executor for one node: one turn per message, half the Python of rclpy's per turn.

rclpy's executors are general: each turn filters every entity through its callback group,
enters each handle in an ExitStack, builds a new wait set, wraps each ready entity in a task
that triggers the executor's guard condition twice (so the next wait returns at once, only to
rebuild the set and wait again), and runs a future's done callbacks in yet another turn. That
is ~90 µs of CPU per turn here (benchmarks/rclpy_costs.py), under the GIL that the planner,
the engine and every other node of the process need, and a message takes two or three turns.
The package's nodes each spin in a thread of their own (ros/spin.py) with callbacks that never block,
so that generality buys nothing: `NodeExecutor` keeps one wait set, refills it from its one
node's entities (the same rclpy calls), runs what is ready, then the tasks those callbacks
made (done callbacks, in the order rclpy would run them), all in the same turn.

Everything else is rclpy's: tasks (rclpy's action server runs each goal as one), `wake`, the
shutdown and Ctrl-C guard conditions, and the `_take_*` helpers for timers, subscriptions,
clients and services."""

from __future__ import annotations

import logging
import threading

from rclpy.exceptions import InvalidHandle
from rclpy.executors import Executor, ExternalShutdownException
from rclpy.impl.implementation_singleton import rclpy_implementation as _rclpy
from rclpy.task import Task
from rclpy.waitable import NumberOfEntities, Waitable

log = logging.getLogger(__name__)


class NodeExecutor(Executor):
    """Spins one node: `spin_once` waits on its entities, then runs everything that is ready,
    and every task (a coroutine awaiting a future) once more. Exceptions of the callbacks it
    ran are raised after the turn, the first one; the others are logged."""

    def __init__(self, node, *, context=None) -> None:
        super().__init__(context=context or node.context)
        self._node = node
        self._wait_set = None
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
                self._hold(in_use, entities) for entities in (
                    node.subscriptions, node.timers, node.clients, node.services,
                    [*node.guards, self._guard, self._sigint_gc], node.waitables))
            self._wait(subscriptions, timers, clients, services, guards, waitables, timeout_sec)
            if self._is_shutdown:
                return
            if not self._context.ok():
                raise ExternalShutdownException()
            ready_waitables = [w for w in waitables if w.is_ready(self._wait_set)]  # before the set is refilled
            ready = {kind: set(self._wait_set.get_ready_entities(kind)) if entities else set()
                     for kind, entities in (("timer", timers), ("subscription", subscriptions),
                                            ("guard_condition", guards), ("client", clients),
                                            ("service", services))}
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

    def _wait(self, subscriptions, timers, clients, services, guards, waitables, timeout_sec) -> None:
        counts = NumberOfEntities(len(subscriptions), len(guards), len(timers), len(clients), len(services))
        for waitable in waitables:
            counts += waitable.get_num_entities()
        shape = (counts.num_subscriptions, counts.num_guard_conditions, counts.num_timers, counts.num_clients,
                 counts.num_services, counts.num_events)
        if shape != self._shape:  # rcl wait sets have fixed room: a new entity needs a new set
            self._wait_set, self._shape = _rclpy.WaitSet(*shape, self._context.handle), shape
        wait_set = self._wait_set
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
