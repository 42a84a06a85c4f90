"""The planner node `llm_planner`: /llm_planner/tasks in, /llm_planner/status out, tasks as
actions and the operators' services (ros/control.py), the planner's settings as ROS 2
parameters (ros/parameters.py), and one link node per robot holding its ExecuteSegment action
client (robot_client.py; spin them beside this node, see `link_nodes`), or all of them in a
process of their own (`robot_links: process`, link_process.py). The planner core runs on the
wall clock in its own thread (LiveDriver); ROS callbacks only convert messages and post
events to it.

It is a managed (lifecycle) node: configure starts and warms the engine and the planner,
activate lets tasks in (before, they are REJECTED "planner not active"), deactivate stops
intake and finishes or cancels the tasks in flight (`lifecycle.deactivate`), cleanup ends
what is left and frees the engine, shutdown ends every task with the reason. With
`lifecycle.autostart` (the default) the node configures and activates itself as it starts.
The robot links live as long as the node, so robots are reachable in every state."""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, cast

import rclpy
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.lifecycle import LifecycleNode, State, TransitionCallbackReturn
from rclpy.node import Node

from llm_planner.catalog.safety import fleet_rules
from llm_planner.catalog.skills import load_skill_set
from llm_planner.dispatch.robot_port import RobotListener
from llm_planner.domain.clock import WallClock
from llm_planner.domain.names import STATUS_TOPIC, TASKS_TOPIC, VIEW_TOPIC
from llm_planner.domain.tasks import StatusUpdate, TaskState
from llm_planner.engine import Engine
from llm_planner.engine.factory import ReplicaPool, make_watched_engine
from llm_planner.lrtrace.planbook import PlanBook
from llm_planner.planning.driver import LiveDriver
from llm_planner.planning.intake import Rejection, build_request
from llm_planner.planning.planner import Planner
from llm_planner.planning.replicas import ReplicaSet
from llm_planner.ros.control import NOT_ACTIVE, TaskControl
from llm_planner.ros.hops import HopLog
from llm_planner.ros.link_process import LinkProcessPort
from llm_planner.ros.messages import status_message, task_fields
from llm_planner.ros.parameters import declare_planner_parameters
from llm_planner.ros.qos import TOPIC
from llm_planner.ros.robot_client import TIMEOUT_CHECK_S, LiveRobotPort, RosRobotPort
from llm_planner.sched.policies import get_policy
from llm_planner.settings.config import PlannerConfig
from llm_planner.settings.fleet import FleetConfig
from llm_planner.settings.model_file import ConfigError
from llm_planner.view.live_view import SNAPSHOT_PERIOD_S, LiveView
from llm_planner_interfaces.msg import Task, TaskStatus, ViewMessage

if TYPE_CHECKING:
    from llm_planner.catalog.exec_model import ExecModel
    from llm_planner.catalog.skills import SkillSet
    from llm_planner.engine.vllm_engine import VllmEngine


# After a planner bug: how long the FAILED statuses have to reach their subscribers (and a
# reliable writer to resend a lost one) before the node's context shuts down.
FAILED_STATUS_FLUSH_S = 1.0


def robot_port_factory(
    config: PlannerConfig, fleet: FleetConfig, post, clock: WallClock, hops: HopLog, node_name: str
) -> Callable[[RobotListener], LiveRobotPort]:
    """Builds the planner's robot port: links in this process or in one of their own."""
    if config.robot_links == "process":
        return lambda listener: LinkProcessPort(fleet, listener, post, clock, fleet.robot_timeout_s, hops, node_name)
    return lambda listener: RosRobotPort(fleet, listener, post, clock, fleet.robot_timeout_s, hops)


class _Relay:
    """The robot links' listener while the planner comes and goes with configure and cleanup:
    it forwards to the planner of the moment (reports for a planner that is gone are dropped)."""

    def __init__(self) -> None:
        self.planner: Planner | None = None

    def segment_started(self, task_id: str, index: int, t: float) -> None:
        if self.planner is not None:
            self.planner.segment_started(task_id, index, t)

    def segment_finished(
        self, task_id: str, index: int, success: bool, call_times_s: list[float], message: str, t: float
    ) -> None:
        if self.planner is not None:
            self.planner.segment_finished(task_id, index, success, call_times_s, message, t)

    def robot_models(self, task_id: str) -> tuple[SkillSet, ExecModel]:
        assert self.planner is not None  # asked by the planner's own dispatch
        return self.planner.robot_models(task_id)


class PlannerNode(LifecycleNode):
    def __init__(
        self,
        config: PlannerConfig,
        fleet: FleetConfig,
        traces: list[str] | None = None,
        node_name: str = "llm_planner",
        engine: Engine | None = None,
    ) -> None:
        """`config` gives the defaults of the node's ROS 2 parameters (ros/parameters.py); the
        planner runs on what they hold after the command line's and params files' overrides.
        `engine`: an already started real engine to reuse (reset at configure); default: the
        configured one, started at configure."""
        super().__init__(node_name)
        try:
            config = declare_planner_parameters(self, config)
        except ConfigError:
            Node.destroy_node(self)
            raise
        fleet.check_types(config.robot_types)
        for rt in config.robot_types.values():
            load_skill_set(rt.skill_set)
        self.config = config
        self.fleet = fleet
        self._robot_types = {r.id: r.type for r in fleet.robots}
        self.clock = WallClock()
        self.plans = PlanBook.from_trace_sets(traces if traces is not None else ["timely_tasks"])
        self._given_engine = engine
        self.safety = fleet_rules(fleet, config)  # a bad rule stops the node here, naming the robot
        self._engine: ReplicaPool | Engine | None = None  # what _free_engine closes
        self.planner: Planner | None = None
        self.driver: LiveDriver | None = None
        self.view: LiveView | None = None
        self.active = False
        self.failure: BaseException | None = None  # the planner's bug that stopped the node
        self._status_pub = self.create_publisher(TaskStatus, STATUS_TOPIC, TOPIC)
        self.hops = HopLog.from_env(node_name)
        self._relay = _Relay()
        self.port: LiveRobotPort = robot_port_factory(config, fleet, self._post, self.clock, self.hops, node_name)(
            self._relay
        )
        if isinstance(self.port, RosRobotPort):  # the links' process checks its own links' timeouts
            self._timeouts = self.create_timer(TIMEOUT_CHECK_S, self.port.check_timeouts)
        self.control = TaskControl(
            self, config, self._robot_types, lambda: self.driver, self.clock, self.plans, self._refuse
        )
        self._ids = itertools.count(1)
        self._sub = self.create_subscription(
            Task, TASKS_TOPIC, self._on_task, TOPIC, callback_group=ReentrantCallbackGroup()
        )
        if config.lifecycle.autostart:
            for name, trigger in (("configure", self.trigger_configure), ("activate", self.trigger_activate)):
                if trigger() != TransitionCallbackReturn.SUCCESS:
                    self.port.close()
                    raise RuntimeError(f"the planner node did not {name} (its log says why)")

    # ----------------------------------------------------------------- lifecycle
    def on_configure(self, state: State) -> TransitionCallbackReturn:
        """Start the engine and the planner, warm the engine up, start the planner's thread."""
        config = self.config
        engine: Engine | ReplicaSet
        try:
            if config.replicas > 1:
                if self._given_engine is not None:
                    raise ValueError(
                        f"replicas: {config.replicas}: the replicas are Ray actors that the node "
                        "starts; it cannot share an engine started elsewhere"
                    )
                self._engine = ReplicaPool(config)
                engine = ReplicaSet(
                    self._engine.engines(config.replicas, self.clock),
                    virtual=False,
                    step_timeout_s=config.engine_step_timeout_s,
                )
            else:
                self._engine = engine = make_watched_engine(config, self.clock, self._given_engine)
            self.view = self._live_view(config.live_view) if config.live_view.enabled else None
            self.planner = Planner(
                config,
                get_policy(config.policy),
                engine,
                self.clock,
                lambda listener: self.port,
                self._publish,
                keep_finished=config.finished_tasks_kept,
                decisions=self.view.new_trace() if self.view is not None else None,
                safety=self.safety,
            )
            self._relay.planner = self.planner
            if self.view is not None:
                self.view.watch(self.planner, [r.id for r in self.fleet.robots])
                self._view_timer = self.create_timer(SNAPSHOT_PERIOD_S, self._tick_view)
            self.planner.warm_up()
        except Exception as exc:  # noqa: BLE001 -- a failed configure is reported as FAILURE, as rclpy expects
            self.get_logger().error(f"configure failed: {type(exc).__name__}: {exc}")
            self._free_engine()
            return TransitionCallbackReturn.FAILURE
        self.driver = LiveDriver(self.planner, on_failure=self._planner_failed)
        self.driver.start()
        engine_name = (
            config.engine_profile
            if config.engine == "sim"
            # a vLLM engine, or a wrapper that forwards its attributes (WatchedEngine, RayEngine)
            else f"{config.vllm.model}, profile {cast('VllmEngine', self.planner.engine).profile_choice.describe()}"
        )
        if config.replicas > 1:
            engine_name += f", {config.replicas} replicas on Ray, placement {config.placement}"
        self.get_logger().info(
            f"policy {config.policy}, engine {config.engine} ({engine_name}), "
            f"{len(self.fleet.robots)} robots, {len(self.plans)} recorded plans"
        )
        if self.view is not None and self.view.url:
            self.get_logger().info(
                f"live view: open {self.view.url} in Foxglove (Open connection, Foxglove "
                "WebSocket; layout config/foxglove/llm_planner.json)"
            )
        return TransitionCallbackReturn.SUCCESS

    def on_activate(self, state: State) -> TransitionCallbackReturn:
        self.active = True
        return super().on_activate(state)

    def on_deactivate(self, state: State) -> TransitionCallbackReturn:
        self.active = False
        if self.config.lifecycle.deactivate == "cancel":
            self._end_all("planner deactivated")
        return super().on_deactivate(state)

    def on_cleanup(self, state: State) -> TransitionCallbackReturn:
        self._unconfigure("planner cleaned up")
        return TransitionCallbackReturn.SUCCESS

    def on_shutdown(self, state: State) -> TransitionCallbackReturn:
        self.active = False
        self._unconfigure("planner shutting down")
        return TransitionCallbackReturn.SUCCESS

    def _planner_failed(self, exc: BaseException) -> None:
        """A bug stopped the planner's thread (it is logged there, with its traceback). Every
        task in flight ends FAILED with the reason, and the node's context shuts down, so the
        process ends (a launch file may respawn it) instead of serving with no planner."""
        self.failure = exc
        self.active = False
        reason = f"the planner failed ({type(exc).__name__}: {exc}); the planner node stops"
        planner = self.planner
        if planner is not None:
            for record in list(planner.records.values()):
                if not record.state.terminal:
                    request = record.request
                    self._publish(
                        StatusUpdate(
                            request.task_id, request.robot_id, TaskState.FAILED, self.clock.now(), message=reason
                        )
                    )
        time.sleep(FAILED_STATUS_FLUSH_S)
        rclpy.try_shutdown(context=self.context)

    def _end_all(self, reason: str) -> None:
        """Every task in flight ends CANCELED with `reason` (in the planner's thread)."""
        if self.driver is not None:
            planner = self.planner

            def cancel_all() -> None:
                assert planner is not None  # set while there is a driver
                for gen in planner.generations:
                    planner.cancel(gen.task_id, reason)

            self.driver.call(cancel_all)

    def _unconfigure(self, reason: str) -> None:
        self._end_all(reason)
        if self.driver is not None:
            self.driver.stop()
        self.driver = None
        self._relay.planner = None
        self.planner = None
        if self.view is not None:
            self.destroy_timer(self._view_timer)
            self.view.close()
            self.view = None
        self._free_engine()

    def _free_engine(self) -> None:
        if self._engine is not None:
            self._engine.close()
            self._engine = None

    # ----------------------------------------------------------------- live view
    def _live_view(self, settings) -> LiveView:
        """The live view's server, and its channels on /llm_planner/view where `publish` asks."""
        sink = None
        if settings.publish:
            publisher = self.create_publisher(ViewMessage, VIEW_TOPIC, TOPIC)

            def sink(channel: str, data: str) -> None:
                publisher.publish(ViewMessage(channel=channel, data=data))

        return LiveView(settings.port if settings.port >= 0 else None, sink=sink, time_ns=time.time_ns)

    def _tick_view(self) -> None:
        view, driver = self.view, self.driver
        if view is not None and driver is not None:
            driver.post(lambda: view.tick(self.clock.now()))

    # ----------------------------------------------------------------- robots
    @property
    def link_nodes(self) -> list[Node]:
        """The nodes of the planner's robot links: spin them beside this one (ros/spin.py)."""
        return self.port.link_nodes

    def wait_for_robots(self, timeout_s: float = 30.0) -> list[str]:
        """Probe every robot until it answers; returns the ids that did not within the time."""
        deadline = time.monotonic() + timeout_s
        missing = []
        for robot in self.fleet.robots:
            if not self.port.probe(robot.id, max(0.1, deadline - time.monotonic())):
                missing.append(robot.id)
        if missing:
            self.get_logger().warning(f"robots not reachable yet: {missing}")
        return missing

    def _post(self, fn) -> None:
        """Into the planner's thread; a robot's late report for a planner cleaned up is dropped."""
        driver = self.driver
        if driver is not None:
            driver.post(fn)

    # ----------------------------------------------------------------- tasks
    def _publish(self, update: StatusUpdate) -> None:
        msg = status_message(update, self.get_clock().now().to_msg())
        self._status_pub.publish(msg)
        self.control.on_status(update, msg)  # the task's PlanTask goal, if it has one

    def _refuse(self, task_id: str, robot_id: str, reason: str) -> None:
        """A task REJECTED with `reason`: by the planner, or here while there is none."""
        driver, planner = self.driver, self.planner
        if driver is not None:

            def reject() -> None:
                assert planner is not None  # set while there is a driver
                planner.reject(task_id, robot_id, reason)

            driver.post(reject)
        else:
            self._publish(StatusUpdate(task_id, robot_id, TaskState.REJECTED, self.clock.now(), message=reason))

    def _on_task(self, msg: Task) -> None:
        arrival = self.clock.now()
        task_id = msg.task_id or f"auto-{next(self._ids)}"
        self.hops.mark(task_id, 0, "received")
        if not self.active:
            self._refuse(task_id, msg.robot_id, NOT_ACTIVE)
            return
        outcome = build_request(
            task_fields(msg, task_id),
            config=self.config,
            robot_types=self._robot_types,
            arrival_s=arrival,
            recorded_plan=self.plans.plan_for(msg.instruction),
            label=self.plans.label_for(msg.instruction),
        )
        if isinstance(outcome, Rejection):
            self._refuse(outcome.task_id, outcome.robot_id, outcome.reason)
            return
        planner = self.planner

        def submit() -> None:
            self.hops.mark(task_id, 0, "enqueued")
            assert planner is not None  # posted only while there is a driver, and so a planner
            planner.submit(outcome)

        self._post(submit)

    def stop(self) -> None:
        """Stop planning: every task in flight ends with the reason, then the planner's thread
        stops; the node stays until destroyed."""
        self.active = False
        self._end_all("planner shutting down")
        if self.driver is not None:
            self.driver.stop()
        self.driver = None

    def destroy_node(self) -> None:
        self.stop()
        if self.view is not None:
            self.view.close()
        self._free_engine()
        self.hops.write()
        self.port.close()
        super().destroy_node()
