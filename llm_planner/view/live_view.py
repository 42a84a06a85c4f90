"""The live view: the planner's channels (view/channels.py) on a Foxglove WebSocket server,
in an MCAP file, and to a `sink` (the planner node's ROS topic, which recorders write).

Decisions and engine iterations go out as they happen; the tasks, robots, queue and
utility are snapshots, taken at most every `period_s` of the planner's clock. Everything is
called from the planner's own thread (or the simulation loop)."""

from __future__ import annotations

import json
import logging
import time
from collections import deque
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from llm_planner.domain.decisions import Decision, DecisionTrace, Iteration, Kind, Reason
from llm_planner.domain.tasks import TaskRecord
from llm_planner.view.channels import (
    BATCH,
    DECISIONS,
    FINISHED_SHOWN,
    QUEUE,
    ROBOTS,
    SCHEMA_NAMES,
    SCHEMAS,
    TASKS,
    UTILITY,
    LevelTotals,
    batch_message,
    decision_message,
    queue_message,
    robots_message,
    tasks_message,
    utility_message,
)

if TYPE_CHECKING:
    from llm_planner.planning.planner import Planner

log = logging.getLogger(__name__)

HOST = "127.0.0.1"  # the server listens on this machine only
SNAPSHOT_PERIOD_S = 0.1

Sink = Callable[[str, str], None]  # (topic, the message as JSON)


class LiveView:
    def __init__(
        self,
        port: int | None = None,
        mcap: str | Path | None = None,
        sink: Sink | None = None,
        time_ns: Callable[[], int] | None = None,
        period_s: float = SNAPSHOT_PERIOD_S,
    ) -> None:
        """`port`: serve the channels on 127.0.0.1 (0: any free port; None: no server).
        `mcap`: also write them to this file. `sink`: also hand each message to it.
        `time_ns`: each message's log time (default: the planner clock's seconds)."""
        import foxglove

        self._context = foxglove.Context()
        self._channels = {
            topic: foxglove.Channel(
                topic,
                message_encoding="json",
                context=self._context,
                schema=foxglove.Schema(
                    name=SCHEMA_NAMES[topic], encoding="jsonschema", data=json.dumps(schema).encode()
                ),
            )
            for topic, schema in SCHEMAS.items()
        }
        self._server = self._serve(foxglove, port) if port is not None else None
        self._mcap = None
        if mcap is not None:
            Path(mcap).parent.mkdir(parents=True, exist_ok=True)
            self._mcap = foxglove.open_mcap(str(mcap), allow_overwrite=True, context=self._context)
        self._sink = sink
        self._time_ns = time_ns
        self.period_s = period_s
        self.trace = self.new_trace()
        self._planner: Planner | None = None
        self._robot_ids: dict[str, None] = {}  # in the order they were first seen
        self._finished: deque[TaskRecord] = deque(maxlen=FINISHED_SHOWN)
        self._levels: dict[str, LevelTotals] = {}
        self._next_snapshot_s = -float("inf")
        self.sent: dict[str, int] = dict.fromkeys(SCHEMAS, 0)
        self.event_s = 0.0  # wall time spent sending decisions and iterations (the cost per event)
        self.snapshot_s = 0.0  # and taking and sending snapshots
        self.snapshots = 0

    def _serve(self, foxglove, port: int):
        """A server on `port`, or on a free one where another program holds it (`url` says which)."""
        try:
            return foxglove.start_server(name="llm_planner", host=HOST, port=port, context=self._context)
        except RuntimeError as exc:
            if port == 0 or "in use" not in str(exc):
                raise
            log.warning("live view: port %d is in use; serving on a free port instead", port)
            return foxglove.start_server(name="llm_planner", host=HOST, port=0, context=self._context)

    @property
    def port(self) -> int | None:
        return self._server.port if self._server is not None else None

    @property
    def url(self) -> str | None:
        """What Foxglove opens (Open connection, Foxglove WebSocket)."""
        return f"ws://{HOST}:{self.port}" if self._server is not None else None

    def new_trace(self) -> DecisionTrace:
        """A decision trace for the next planner to watch, whose events this view sends."""
        self.trace = DecisionTrace(listener=self._on_event)
        return self.trace

    def watch(self, planner: Planner, robot_ids: Sequence[str] = ()) -> None:
        """Snapshot `planner` from now on (it must write its decisions to `self.trace`)."""
        if planner.decisions is not self.trace:
            raise ValueError("the planner writes its decisions elsewhere: give it decisions=view.new_trace()")
        self._planner = planner
        self._robot_ids.update(dict.fromkeys(robot_ids))
        self._finished.clear()
        self._levels = {}

    def tick(self, now: float, force: bool = False) -> None:
        """The snapshot channels, if `period_s` has passed since the last (or `force`)."""
        if self._planner is None or (now < self._next_snapshot_s and not force):
            return
        self._next_snapshot_s = now + self.period_s
        started = time.perf_counter()
        planner = self._planner
        self._robot_ids.update(dict.fromkeys(g.record.request.robot_id for g in planner.generations))
        stamp = self._stamp(now)
        self._log(TASKS, tasks_message(planner, self._finished, now), stamp)
        self._log(ROBOTS, robots_message(planner, list(self._robot_ids), now), stamp)
        self._log(QUEUE, queue_message(planner, now), stamp)
        self._log(UTILITY, utility_message(planner, self._levels, now), stamp)
        self.snapshot_s += time.perf_counter() - started
        self.snapshots += 1

    def _on_event(self, event: Decision | Iteration) -> None:
        started = time.perf_counter()
        self._send(event)
        self.event_s += time.perf_counter() - started

    def _send(self, event: Decision | Iteration) -> None:
        if isinstance(event, Decision):
            if event.kind is Kind.ENDED and event.reason is not Reason.REJECTED and self._planner is not None:
                self._ended(self._planner.records[event.task_id])
            stamp = self._stamp(event.t_s)
            self._log(DECISIONS, decision_message(event, stamp), stamp)
        else:
            self._log(BATCH, batch_message(event), self._stamp(event.t_s))

    def _ended(self, record: TaskRecord) -> None:
        self._finished.append(record)
        self._levels.setdefault(record.request.urgency_name, LevelTotals()).add(record)

    def _stamp(self, t_s: float) -> int:
        return self._time_ns() if self._time_ns is not None else int(max(0.0, t_s) * 1e9)

    def _log(self, topic: str, message: dict, log_time: int) -> None:
        self._channels[topic].log(message, log_time=log_time)
        if self._sink is not None:
            self._sink(topic, json.dumps(message))
        self.sent[topic] += 1

    def close(self) -> None:
        if self._mcap is not None:
            self._mcap.close()
            self._mcap = None
        if self._server is not None:
            self._server.stop()
            self._server = None
