"""LRTrace over ROS 2: replay a workload's tasks to a running fleet at their arrival times,
record /llm_planner/tasks and /llm_planner/status to MCAP (ros2msg schemas, CDR, readable by
standard MCAP/rosbag2 tools) with the live view's JSON channels where the planner publishes
them, and rebuild task records from a recording for `report`."""

from __future__ import annotations

import json
import math
import statistics
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llm_planner.catalog.skills import load_skill_set
from llm_planner.domain.names import STATUS_TOPIC, TASKS_TOPIC, VIEW_TOPIC
from llm_planner.domain.tasks import TaskRecord, TaskRequest, TaskState
from llm_planner.lrtrace.formats import Job, TraceSet, Workload
from llm_planner.lrtrace.jobs import job_fields
from llm_planner.lrtrace.simulate import check_workload
from llm_planner.planning.intake import Rejection, build_request
from llm_planner.planning.replan import follow_up_named, next_follow_up, robot_failed
from llm_planner.planning.segmenter import split_segments
from llm_planner.ros.messages import task_fields
from llm_planner.settings.config import PlannerConfig
from llm_planner.settings.paths import data_path
from llm_planner.view.channels import SCHEMA_NAMES, SCHEMAS

_SEPARATOR = "=" * 80
_TIME_DEF = "int32 sec\nuint32 nanosec\n"


def _msg_text(name: str) -> str:
    root = Path(__file__).resolve().parents[2] / "interfaces" / "llm_planner_interfaces" / "msg"
    if not root.is_dir():
        from ament_index_python.packages import get_package_share_directory

        root = Path(get_package_share_directory("llm_planner_interfaces")) / "msg"
    return (root / f"{name}.msg").read_text()


def schemas() -> dict[str, tuple[str, str]]:
    """topic -> (ROS type name, ros2msg definition with dependencies, rosbag2's MCAP layout)."""
    status = _msg_text("TaskStatus") + f"\n{_SEPARATOR}\nMSG: builtin_interfaces/Time\n{_TIME_DEF}"
    return {
        TASKS_TOPIC: ("llm_planner_interfaces/msg/Task", _msg_text("Task")),
        STATUS_TOPIC: ("llm_planner_interfaces/msg/TaskStatus", status),
    }


class Recorder:
    """Subscribes to the planner's topics and writes every message, serialized, to MCAP; the
    live view's messages (/llm_planner/view) go to their own JSON channels, as Foxglove shows
    them live."""

    def __init__(self, node, path: str | Path) -> None:
        from mcap.writer import Writer

        from llm_planner.ros.qos import TOPIC
        from llm_planner_interfaces.msg import Task, TaskStatus, ViewMessage

        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file = open(self.path, "wb")  # noqa: SIM115 -- open until close()
        self._writer: Writer | None = Writer(self._file)  # None once closed
        self._writer.start(profile="ros2", library="llm_planner lrtrace")
        self._lock = threading.Lock()
        self._channels = {}
        self.count = 0
        for topic, (type_name, definition) in schemas().items():
            schema = self._writer.register_schema(type_name, "ros2msg", definition.encode())
            self._channels[topic] = self._writer.register_channel(topic, "cdr", schema)
        for topic, json_schema in SCHEMAS.items():
            schema = self._writer.register_schema(SCHEMA_NAMES[topic], "jsonschema", json.dumps(json_schema).encode())
            self._channels[topic] = self._writer.register_channel(topic, "json", schema)
        self._subs = [
            node.create_subscription(Task, TASKS_TOPIC, lambda d: self._write(TASKS_TOPIC, d), TOPIC, raw=True),
            node.create_subscription(TaskStatus, STATUS_TOPIC, lambda d: self._write(STATUS_TOPIC, d), TOPIC, raw=True),
            node.create_subscription(ViewMessage, VIEW_TOPIC, self._write_view, TOPIC),
        ]

    def _write_view(self, msg) -> None:
        if msg.channel in SCHEMAS:
            self._write(msg.channel, msg.data.encode())

    def _write(self, topic: str, data: bytes) -> None:
        now = time.time_ns()
        with self._lock:
            if self._writer is not None:
                self._writer.add_message(self._channels[topic], log_time=now, data=data, publish_time=now)
                self.count += 1

    def close(self) -> None:
        with self._lock:
            if self._writer is not None:
                self._writer.finish()
                self._file.close()
                self._writer = None


def read_recording(path: str | Path) -> tuple[list, list]:
    """(tasks, statuses) as decoded messages with their log time in seconds, in order."""
    from mcap.reader import make_reader
    from mcap_ros2.decoder import DecoderFactory

    # decoded messages (generated ROS types)
    tasks: list[tuple[float, Any]] = []
    statuses: list[tuple[float, Any]] = []
    with open(path, "rb") as fh:
        reader = make_reader(fh, decoder_factories=[DecoderFactory()])
        for _, channel, message, decoded in reader.iter_decoded_messages(topics=[TASKS_TOPIC, STATUS_TOPIC]):
            target = tasks if channel.topic == TASKS_TOPIC else statuses
            target.append((message.log_time / 1e9, decoded))
    return tasks, statuses


@dataclass
class RecordedTasks:
    """The tasks of a recording: when each was published (log time, s), to which robot, which
    were urgent, and the statuses recorded."""

    published: dict[str, float]
    robot: dict[str, str]
    urgent: set[str]
    statuses: list

    @property
    def start(self) -> float:
        """The first task's publication."""
        return min(self.published.values(), default=0.0)

    def reached(self, state: TaskState) -> dict[str, float]:
        """Per task: the time of its first recorded status in `state`."""
        first: dict[str, float] = {}
        for t, msg in self.statuses:
            if msg.state == state:
                first.setdefault(msg.task_id, t)
        return first


def read_tasks(path: str | Path) -> RecordedTasks:
    """The tasks of a recording of `lrtrace replay`, with their statuses."""
    tasks, statuses = read_recording(path)
    return RecordedTasks(
        {msg.task_id: t for t, msg in tasks},
        {msg.task_id: msg.robot_id for _, msg in tasks},
        {msg.task_id for _, msg in tasks if msg.urgency > 0},
        statuses,
    )


def first_sent_after_arrival(path: str | Path) -> dict[str, float]:
    """Per task in a recording: its first segment sent to the robot (EXECUTING), seconds after
    it was queued."""
    recorded = read_tasks(path)
    queued = recorded.reached(TaskState.QUEUED)
    return {task: t - queued[task] for task, t in recorded.reached(TaskState.EXECUTING).items() if task in queued}


def records_from_recording(path: str | Path, config: PlannerConfig, traces: TraceSet | None = None) -> list[TaskRecord]:
    """Task records (the inputs of the metrics) rebuilt from recorded tasks and statuses.
    The maximum utility counts the units of the plan the planner sent (its EXECUTING
    segments), split by the robot type's skill set (from the trace the instruction matches)."""
    tasks, statuses = read_recording(path)
    by_text = {t.instruction.strip(): t for t in (traces.traces if traces else [])}
    sent: dict[str, list[str]] = defaultdict(list)
    final: dict[str, Any] = {}  # a task's final TaskStatus
    ended: dict[str, float] = {}
    arrival: dict[str, float] = {}
    for t, msg in statuses:
        if msg.state == TaskState.QUEUED:
            arrival.setdefault(msg.task_id, t)
        if msg.state == TaskState.EXECUTING:
            sent[msg.task_id].append(msg.segment_text)
        if msg.state >= TaskState.SUCCEEDED and msg.task_id not in final:
            final[msg.task_id] = msg
            ended[msg.task_id] = t
    records = []
    for t, task in tasks:
        if not task.task_id or task.task_id not in final:
            continue
        trace = by_text.get(task.instruction.strip())
        robot_type = trace.robot_type if trace else next(iter(config.robot_types))
        request = build_request(
            task_fields(task),
            config=config,
            robot_types={task.robot_id: robot_type},
            arrival_s=arrival.get(task.task_id, t),
            recorded_plan=trace.plan if trace else None,
            label=trace.name if trace else "",
        )
        if isinstance(request, Rejection):
            continue  # refused at the planner's intake: it ran nothing, and its status says why
        tuf = request.tuf
        msg = final[task.task_id]
        skill_set = load_skill_set(config.robot_type(robot_type).skill_set)
        units = sum(1 for s in split_segments(skill_set, "".join(sent[task.task_id])) if s.calls)
        record = TaskRecord(request, state=TaskState(msg.state), message=msg.message, plan="".join(sent[task.task_id]))
        record.utility = 0.0 if math.isnan(msg.utility) else msg.utility
        record.response_time_s = msg.response_time_s
        record.waiting_time_s = 0.0 if math.isnan(msg.waiting_time_s) else msg.waiting_time_s
        record.units_executed = units if msg.state == TaskState.SUCCEEDED else 0
        record.max_utility = units * tuf.beta
        record.finished_s = ended[task.task_id]
        records.append(record)
    return records + _follow_up_records(records, final, arrival, ended, config)


def _follow_up_records(
    records: list[TaskRecord], final: dict, arrival: dict, ended: dict, config: PlannerConfig
) -> list[TaskRecord]:
    """The planner's error follow-ups, known from statuses alone (no task message carries
    them): each at the replan level, for its failed task's robot, linked through the failed
    task's final status."""
    by_id = {r.request.task_id: r for r in records}
    level = config.replan_level
    out: list[TaskRecord] = []
    pending = sorted(by_id, key=lambda i: arrival.get(i, math.inf))
    for task_id in pending:  # grows with each follow-up, whose own follow-up comes later
        parent = by_id[task_id]
        parent.robot_failure = parent.message if robot_failed(parent.message) else ""
        named = follow_up_named(parent.message)
        if not named or named not in final:
            continue
        parent.followed_by = named
        msg = final[named]
        request = TaskRequest(
            named,
            msg.robot_id,
            parent.request.robot_type,
            "",
            level.name,
            level.tuf,
            arrival.get(named, ended[task_id]),
            label=parent.request.label,
            follow_up=next_follow_up(parent.request, ended[task_id]),
        )
        record = TaskRecord(request, state=TaskState(msg.state), message=msg.message)
        record.utility = 0.0 if math.isnan(msg.utility) else msg.utility
        record.response_time_s = msg.response_time_s
        record.finished_s = ended[named]
        by_id[named] = record
        pending.append(named)
        out.append(record)
    return out


def first_action_s(client, task_id: str) -> float | None:
    """Publish -> first segment sent to the robot (its EXECUTING status), as the client saw
    them: the same measure on an idle planner and under load."""
    published, executing = client.published.get(task_id), client.first(task_id, TaskState.EXECUTING)
    return executing[0] - published if published is not None and executing else None


def idle_first_actions(
    client,
    workload: Workload,
    traces: TraceSet,
    config: PlannerConfig,
    level: str = "urgent",
    timeout_s: float = 120.0,
    repeats: int = 3,
) -> dict[int, float]:
    """Each distinct `level` task of the workload alone on the idle planner, one after the
    other (each to its end): trace id -> first action seconds (see first_action_s), the median
    of `repeats` runs after one that is not counted. The floor is measured warm: the first run
    of a prompt pays for cold caches and code paths the runs under load have already warmed."""
    by_id = check_workload(workload, traces, config)
    chosen: dict[int, Job] = {}
    for job in sorted(workload.jobs, key=lambda j: j.arrival_s):
        if by_id[job.trace_id].urgency == level:
            chosen.setdefault(job.trace_id, job)
    runs: dict[int, list[float]] = defaultdict(list)
    for attempt in range(repeats + 1):
        for trace_id, job in chosen.items():
            task_id = f"idle-{level}-{trace_id}-{attempt}"
            client.send(job_fields(job, by_id[trace_id], config, task_id))
            client.wait_terminal([task_id], timeout_s)
            seconds = first_action_s(client, task_id)
            if seconds is not None and attempt > 0:
                runs[trace_id].append(seconds)
    return {trace_id: statistics.median(seconds) for trace_id, seconds in runs.items()}


def replay(
    client,
    workload: Workload,
    traces: TraceSet,
    config: PlannerConfig,
    speed: float = 1.0,
    progress: Callable[[int, int], None] | None = None,
    grace_s: float = 60.0,
) -> bool:
    """Publish each job at its arrival time (divided by `speed`) and wait until every task
    has a terminal status, or until no status has changed for `grace_s` after the last
    arrival (robots still executing long plans keep reporting). The planner's error follow-ups
    of these tasks are waited for too. True if all ended."""
    by_id = check_workload(workload, traces, config)
    jobs = sorted(workload.jobs, key=lambda j: j.arrival_s)
    ids = {j.task_id for j in jobs}
    start = time.monotonic()
    for n, job in enumerate(jobs):
        delay = start + job.arrival_s / speed - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        client.send(job_fields(job, by_id[job.trace_id], config))
        if progress:
            progress(client.count_ended(ids), n + 1)
    deadline = time.monotonic() + grace_s
    heard = -1
    while time.monotonic() < deadline:
        ids = with_follow_ups(client, ids)
        done = client.count_ended(ids)
        if progress:
            progress(done, len(ids))
        if done == len(ids):
            return True
        statuses = sum(len(client.statuses.get(i, ())) for i in ids)
        if statuses != heard:  # progress: the grace starts again
            heard, deadline = statuses, time.monotonic() + grace_s
        time.sleep(0.2)
    return False


def with_follow_ups(client, ids: set[str]) -> set[str]:
    """`ids` and the error follow-ups their final statuses name, and theirs in turn."""
    out, frontier = set(ids), list(ids)
    while frontier:
        final = client.terminal(frontier.pop())
        named = follow_up_named(final.message) if final is not None else ""
        if named and named not in out:
            out.add(named)
            frontier.append(named)
    return out


def default_traces() -> Path:
    return data_path("config", "traces", "timely_tasks.yaml")
