"""A workload's job as a task: the fields every way of running it sends (the simulation
submits them, live replay publishes them), so a simulated and a replayed job are one task."""

from __future__ import annotations

from llm_planner.domain.tasks import TaskRequest
from llm_planner.domain.tuf import Tuf
from llm_planner.lrtrace.formats import Job, Trace, TraceSet, Workload
from llm_planner.planning.intake import Rejection, TaskFields, build_request, urgency_index
from llm_planner.settings.config import PlannerConfig


def job_fields(job: Job, trace: Trace, config: PlannerConfig, task_id: str | None = None) -> TaskFields:
    """The job's TUF is the job's own, else its trace's, else its trace's level's; it is sent
    under the level whose TUF it is, else under the trace's level."""
    triple = job.tuf or trace.tuf
    tuf = Tuf(*triple) if triple is not None else None
    beta, ert_s, cutoff_s = tuf.as_triple() if tuf is not None else (0.0, 0.0, 0.0)
    return TaskFields(
        task_id or job.task_id,
        job.robot_id,
        trace.instruction,
        urgency_index(config, tuf, trace.urgency),
        beta,
        ert_s,
        cutoff_s,
    )


def agent_types(workload: Workload, traces: TraceSet) -> dict[str, str]:
    """Robot id -> robot type of each agent of the workload (the robot type of its traces)."""
    by_id = traces.by_id()
    return {j.robot_id: by_id[j.trace_id].robot_type for j in workload.jobs}


def job_request(job: Job, trace: Trace, config: PlannerConfig, with_plan: bool = True) -> TaskRequest:
    """The job as the simulated planner receives it, its agent a robot of the trace's type; a
    job no planner would accept is an error of the workload."""
    outcome = build_request(
        job_fields(job, trace, config),
        config=config,
        robot_types={job.robot_id: trace.robot_type},
        arrival_s=job.arrival_s,
        recorded_plan=(trace.plan or None) if with_plan else None,
        label=trace.name,
    )
    if isinstance(outcome, Rejection):
        raise ValueError(f"job {job.job_id} (trace {trace.trace_id}): {outcome.reason}")
    return outcome
