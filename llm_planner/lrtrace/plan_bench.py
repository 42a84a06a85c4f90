"""The plan benchmark (`llm-planner plans`): one plan per distinct task, generated on an engine
exactly as the planner asks for it (same prompt, grammar and token limit), then judged by
`plan_check`: validity, truncation, calls, segments, repeated statements; how plan length
follows the task where the task file counts its steps; and, where it lists what a plan must call
and name, whether the plan does the task (`task_check`)."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from llm_planner.catalog.skills import SkillSet
from llm_planner.engine.base import Engine
from llm_planner.lrtrace.task_list import PlanTask
from llm_planner.planning.plan_check import PlanCheck, check_generated_plan
from llm_planner.planning.prompts import plan_request, shared_request
from llm_planner.planning.segmenter import make_segmenter
from llm_planner.planning.task_check import TaskCheck, check_task, parse_needs, unknown_skills
from llm_planner.predictor.rank import spearman

SUMMARY_KEYS = (
    "tasks",
    "valid_rate",
    "truncated_rate",
    "calls_mean",
    "repeated_statement_fraction",
    "tokens_mean",
    "task_rate",
)


@dataclass
class PlanRun:
    task: PlanTask
    skill_set: str
    text: str
    tokens: int
    check: PlanCheck
    segment_tokens: list[int] = field(default_factory=list)  # generated tokens per segment, as cut live
    task_check: TaskCheck | None = None  # None: the task file does not say what the task needs

    def as_json(self) -> dict:
        return {
            "id": self.task.task_id,
            "robot_type": self.task.robot_type,
            "skill_set": self.skill_set,
            "split": self.task.split,
            "kind": self.task.kind,
            "steps": self.task.steps,
            "task_input": self.task.task_input,
            "text": self.text,
            "tokens": self.tokens,
            "skill_calls": self.check.calls,
            "segments": len(self.check.segments),
            "segment_tokens": self.segment_tokens,
            "repeated_statements": self.check.repeated_statements,
            "truncated": self.check.truncated,
            "valid": self.check.valid,
            "problems": self.check.problems,
            "required_skills": list(self.task.needs.skills),
            "required_objects": list(self.task.needs.objects),
            "first_skills": list(self.task.needs.first),
            "does_task": None if self.task_check is None else self.task_check.does_task,
            "missing": None if self.task_check is None else self.task_check.missing,
        }


def generate_plans(
    engine: Engine,
    tasks: list[PlanTask],
    skill_sets: dict[str, SkillSet],
    max_tokens: int,
    on_plan: Callable[[PlanRun], None] | None = None,
    task_grammar: bool = True,
    examples: Callable[[str, str], tuple[tuple[str, str], ...]] | None = None,
    alert_hazards: bool = True,
) -> list[PlanRun]:
    """Generate every task's plan, all sharing the engine's batch, to its end.
    `skill_sets`: robot type -> skill set. `examples`: (skill set name, task text) -> the
    solved tasks shown before it (planning/retrieval.py)."""
    if engine.needs_recorded_plan:
        missing = [t.task_id for t in tasks if not t.recorded_plan]
        if missing:
            raise ValueError(
                f"the sim engine replays recorded plans; {len(missing)} tasks have none "
                f"(first: {missing[0]}); use --engine vllm"
            )
    for task in tasks:
        unknown = unknown_skills(skill_sets[task.robot_type], task.needs)
        if unknown:
            raise ValueError(
                f"task {task.task_id}: required skills {unknown} are not in skill set "
                f"{skill_sets[task.robot_type].name}"
            )
    tuned = engine.tuned_skill_sets
    engine.warm_up([shared_request(s, s.name in tuned) for s in {s.name: s for s in skill_sets.values()}.values()])
    by_id = {f"plan-{n}": task for n, task in enumerate(tasks)}
    texts = {gen_id: "" for gen_id in by_id}
    tokens = Counter[str]()
    # The segmenter reads the plan token by token, as the planner's does: tokens per segment.
    segmenters = {gen_id: make_segmenter(skill_sets[task.robot_type]) for gen_id, task in by_id.items()}
    cuts: dict[str, list[int]] = {gen_id: [] for gen_id in by_id}
    for gen_id, task in by_id.items():
        skill_set = skill_sets[task.robot_type]
        engine.add(
            plan_request(
                gen_id,
                skill_set,
                task.task_input,
                task.recorded_plan,
                max_tokens,
                skill_set.name in tuned,
                task_grammar,
                examples=examples(skill_set.name, task.task_input) if examples is not None else (),
                alert_hazards=alert_hazards,
            )
        )
    runs: dict[str, PlanRun] = {}
    while engine.running:
        for out in engine.step().outputs:
            gen_id = out.gen_id
            texts[gen_id] += out.text
            tokens[gen_id] += 1
            cuts[gen_id] += [tokens[gen_id]] * len(segmenters[gen_id].feed(out.text))
            if out.finished:
                task = by_id[gen_id]
                skill_set = skill_sets[task.robot_type]
                last = segmenters[gen_id].flush()
                if last is not None and last.text.strip():
                    cuts[gen_id].append(tokens[gen_id])
                check = check_generated_plan(skill_set, task.task_input, texts[gen_id], out.truncated)
                per_segment = [b - a for a, b in zip([0] + cuts[gen_id], cuts[gen_id])]
                runs[gen_id] = PlanRun(
                    task,
                    skill_set.name,
                    texts[gen_id],
                    tokens[gen_id],
                    check,
                    per_segment,
                    _task_check(skill_set, texts[gen_id], task),
                )
                engine.release(gen_id)
                if on_plan:
                    on_plan(runs[gen_id])
    return [runs[gen_id] for gen_id in by_id]


def recheck(plans: list[dict], skill_sets: dict[str, SkillSet]) -> list[PlanRun]:
    """Judge the plans of an earlier report again (its `plans` list), e.g. after the checks
    changed, without generating them again."""
    runs = []
    for item in plans:
        needs = parse_needs(
            item.get("required_skills"), item.get("required_objects"), item["id"], item.get("first_skills")
        )
        task = PlanTask(
            item["id"],
            item["robot_type"],
            item["task_input"],
            split=item.get("split", ""),
            kind=item.get("kind", ""),
            steps=item.get("steps"),
            needs=needs,
        )
        skill_set = skill_sets[task.robot_type]
        check = check_generated_plan(skill_set, task.task_input, item["text"], bool(item["truncated"]))
        runs.append(
            PlanRun(
                task,
                skill_set.name,
                item["text"],
                int(item["tokens"]),
                check,
                list(item.get("segment_tokens", [])),
                _task_check(skill_set, item["text"], task),
            )
        )
    return runs


def _task_check(skill_set: SkillSet, plan: str, task: PlanTask) -> TaskCheck | None:
    return check_task(skill_set, plan, task.needs) if task.needs else None


def summarize(runs: list[PlanRun]) -> dict:
    n = len(runs)
    if n == 0:
        return {key: None for key in SUMMARY_KEYS} | {"tasks": 0}
    statements = sum(len(r.check.segments) for r in runs)
    counted = [(r.tokens, r.task.steps) for r in runs if r.task.steps is not None]  # (tokens, steps)
    problems = Counter(p.split(":")[0] for r in runs for p in r.check.problems)
    judged = [r.task_check for r in runs if r.task_check is not None]
    openings = [r.task_check for r in runs if r.task_check is not None and r.task.needs.first]
    return {
        "tasks": n,
        "valid_rate": sum(r.check.valid for r in runs) / n,
        "truncated_rate": sum(r.check.truncated for r in runs) / n,
        "calls_mean": sum(len(r.check.calls) for r in runs) / n,
        "repeated_statement_fraction": (
            sum(r.check.repeated_statements for r in runs) / statements if statements else 0.0
        ),
        "tokens_mean": sum(r.tokens for r in runs) / n,
        "spearman_tokens_steps": spearman([tokens for tokens, _ in counted], [steps for _, steps in counted]),
        # plans that do the task (`planning/task_check.py`), of the tasks that list what it needs
        "task_rate": sum(c.does_task for c in judged) / len(judged) if judged else None,
        "task_judged": len(judged),
        # error follow-ups whose plan opens with a plain call of one of the task's first skills
        "first_action_rate": sum(not c.wrong_first for c in openings) / len(openings) if openings else None,
        "first_judged": len(openings),
        "problems": dict(problems.most_common()),
    }


def report(runs: list[PlanRun]) -> dict:
    """The --json document: the summary keys at the top, then per split and per robot type,
    then every plan."""
    by_split: dict[str, list[PlanRun]] = {}
    by_robot: dict[str, list[PlanRun]] = {}
    for run in runs:
        if run.task.split:
            by_split.setdefault(run.task.split, []).append(run)
        by_robot.setdefault(run.task.robot_type, []).append(run)
    return {
        **summarize(runs),
        "split": {name: summarize(group) for name, group in sorted(by_split.items())},
        "robot_type": {name: summarize(group) for name, group in sorted(by_robot.items())},
        "plans": [r.as_json() for r in runs],
    }


def sign_test_p(wins: int, losses: int) -> float:
    """Two-sided exact sign test: how likely a split of the discordant pairs at least this
    uneven is when either model is as likely to win each (ties left out)."""
    n = wins + losses
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(wins, losses) + 1)) / 2**n
    return min(1.0, 2 * tail)


def format_p(p: float) -> str:
    return "<0.01" if p < 0.01 else f"{p:.2f}"


def paired(plans: list[dict], other: list[dict]) -> dict:
    """Two reports' plans of the same tasks (their `plans` lists), task by task: how many tasks
    both do, only the first does, only the second does, neither does, and the sign test's p of
    that split; for all tasks and per robot type. A difference of a few tasks on a few dozen is
    often chance: a small p says it is not."""
    ids = [p["id"] for p in plans]
    others = {p["id"]: p for p in other}
    if len(set(ids)) != len(ids) or len(others) != len(other):
        raise ValueError("a report to pair names a task twice")
    if set(ids) != set(others):
        unmatched = sorted(set(ids) ^ set(others))
        raise ValueError(f"the two reports hold different tasks ({len(unmatched)} unmatched, e.g. {unmatched[0]})")
    total: Counter = Counter()
    per_robot: dict[str, Counter] = {}
    for plan in plans:
        first, second = plan["does_task"], others[plan["id"]]["does_task"]
        if first is None or second is None:  # the task lists no needs
            continue
        outcome = {(True, True): "both", (True, False): "only_first", (False, True): "only_second"}.get(
            (first, second), "neither"
        )
        total[outcome] += 1
        per_robot.setdefault(plan["robot_type"], Counter())[outcome] += 1
    return {**_paired_row(total), "robot_type": {name: _paired_row(c) for name, c in sorted(per_robot.items())}}


def _paired_row(counts: Counter) -> dict:
    outcomes = {k: counts[k] for k in ("both", "only_first", "only_second", "neither")}
    return outcomes | {"p": sign_test_p(counts["only_first"], counts["only_second"])}
