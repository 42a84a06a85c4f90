"""Error follow-ups: when a robot fails a call, the planner plans again for that robot.

The follow-up is an urgent task for the same robot (`replan.urgency`; by default the most
urgent level) whose text holds the original task, the calls done so far, the call that failed
and the robot's reason, in the error follow-up form of the TimelyLLM artifact
(`Scene: [...], Task: [E] ...`). It is generated and streamed like any task; the failed task
ends FAILED with a message that names its follow-up. A task and its follow-ups get at most
`replan.max_attempts` follow-ups in all. A task whose utility is already lost (its first action
came at or after its cutoff, or has not come and cannot come before it) is not replanned unless
`replan.when_utility_lost`.

The sim engine replays recorded plans: a follow-up replays the calls of the failed plan from
the failed call on (a retry of what was left), so simulated runs take the same path."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from llm_planner.catalog.scene import parse_task_text
from llm_planner.catalog.skills import SkillSet
from llm_planner.domain.names import follow_up_task_id
from llm_planner.domain.tasks import FollowUp, TaskRecord, TaskRequest
from llm_planner.settings.config import ReplanConfig, UrgencyLevel


@dataclass(frozen=True)
class Failure:
    segment_index: int
    call: str  # the call that failed; "" when the robot failed the segment before running a call
    reason: str
    done: tuple[str, ...]  # the plan's calls the robot completed, in order
    at_s: float


def failure_of(record: TaskRecord, index: int, call_times_s: list[float], message: str, at_s: float) -> Failure:
    """What a failed segment report says. A robot reports the times of the calls it ran, the
    failed one last (ros/robot_server.py, dispatch/robot_port.py)."""
    segment = record.segments[index]
    failed = len(call_times_s) - 1 if call_times_s else -1
    done = [c.text for earlier in record.segments[:index] for c in earlier.calls]
    done += [c.text for c in segment.calls[: max(failed, 0)]]
    call = segment.calls[failed].text if 0 <= failed < len(segment.calls) else ""
    return Failure(index, call, message or "no reason given", tuple(done), at_s)


_REPLANNED_AS = "; replanned as task "
_ROBOT_FAILED = re.compile(r"^robot \S+ failed segment \d+")


def describe(robot_id: str, failure: Failure) -> str:
    where = f" at {failure.call}" if failure.call else ""
    return f"robot {robot_id} failed segment {failure.segment_index}{where}: {failure.reason}"


def replanned_message(what: str, follow_up_id: str) -> str:
    return f"{what}{_REPLANNED_AS}{follow_up_id}"


def follow_up_named(message: str) -> str:
    """The follow-up a failed task's final status names ("" if none): how a recording links them."""
    _, found, task_id = message.rpartition(_REPLANNED_AS)
    return task_id if found else ""


def robot_failed(message: str) -> bool:
    """The final status says the robot failed a call (`describe`)."""
    return _ROBOT_FAILED.match(message) is not None


def utility_lost(record: TaskRecord, now_s: float) -> bool:
    """The task's response (its first action) came at or after its cutoff, or has not come
    and can no longer come before it: its utility is 0 whatever follows."""
    request = record.request
    first = record.segments[0].started_s if record.segments else math.nan
    responded = first if math.isfinite(first) else now_s
    return responded - request.arrival_s >= request.tuf.cutoff_s


def refusal(record: TaskRecord, settings: ReplanConfig, now_s: float) -> str:
    """Why the failed task gets no follow-up; "" when it gets one."""
    made = record.request.follow_up.attempt if record.request.follow_up else 0
    if made >= settings.max_attempts:
        return f"not replanned: {made} of {settings.max_attempts} follow-ups made (replan.max_attempts)"
    if not settings.when_utility_lost and utility_lost(record, now_s):
        return "not replanned: its utility is lost (replan.when_utility_lost)"
    return ""


def follow_up_text(original_text: str, failure: Failure) -> str:
    """The follow-up's task text: the original scene, then an `[E]` task with the failure,
    what was done and the original instruction."""
    task = parse_task_text(original_text)
    what = f"{failure.call} failed" if failure.call else "the robot failed"
    done = "; ".join(failure.done) if failure.done else "nothing"
    text = f"Task: [E] {what}: {failure.reason.rstrip('.')}. Done so far: {done}. Original request: {task.instruction}"
    return f"Scene: [{', '.join(task.object_names)}], {text}" if task.objects else text


def retry_plan(skill_set: SkillSet, recorded_plan: str, failure: Failure) -> str:
    """For the sim engine: the recorded plan's calls from the failed one on."""
    calls = [c.text for c in skill_set.find_calls(recorded_plan)][len(failure.done) :]
    if skill_set.syntax == "python":
        return "\n".join(calls)
    return "".join(f"{call};" for call in calls)


def next_follow_up(failed: TaskRequest, failed_s: float) -> FollowUp:
    """What makes the follow-up of the failed task one: the next in its task's chain."""
    prior = failed.follow_up
    if prior is None:
        return FollowUp(failed.task_id, failed.task_id, 1, failed_s, failed.instruction)
    return FollowUp(failed.task_id, prior.root_task, prior.attempt + 1, failed_s, prior.original_text)


def follow_up_request(failed: TaskRequest, failure: Failure, level: UrgencyLevel, skill_set: SkillSet) -> TaskRequest:
    follow_up = next_follow_up(failed, failure.at_s)
    return TaskRequest(
        task_id=follow_up_task_id(follow_up.root_task, follow_up.attempt),
        robot_id=failed.robot_id,
        robot_type=failed.robot_type,
        instruction=follow_up_text(follow_up.original_text, failure),
        urgency_name=level.name,
        tuf=level.tuf,
        arrival_s=failure.at_s,
        recorded_plan=None if failed.recorded_plan is None else retry_plan(skill_set, failed.recorded_plan, failure),
        label=failed.label,
        follow_up=follow_up,
    )
