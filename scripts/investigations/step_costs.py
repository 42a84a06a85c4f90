"""What the real engine's iterations cost against its profile, and what each alert waited for.

Runs `lrtrace compare` in-process on the real engine (virtual clock) and records every vLLM
iteration: its batch, the prompt tokens it prefilled, the requests it started (new prompts and
resumes), its measured duration and the profile's prediction of its decode part. Prints the
median decode-only iteration by batch size, measured against the profile, then, per urgent
task of each run, its iterations from arrival to its first segment sent, as
`start:duration ms/batch[/pf prefilled tokens][/n requests started]`, with `S` for a
suspension. Where latency-guided admission weighed it (the policies that have it), the line
also gives how often it was held back and, at the first weighing, the forecast of its first
segment's end after arrival, as the admission prices it (its next iteration with the
decision's prefills and resumes, then its typical length, in tokens, at the batch it would
join). E.g.

    . scripts/env.sh && python scripts/investigations/step_costs.py --config out/uncorrected.yaml \\
        --policies timely,vllm-stream --seeds 2 config/jobs/contended_fleet.yaml \\
        --traces config/traces/timely_tasks.yaml
"""

from __future__ import annotations

import argparse
import statistics
from collections import defaultdict


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workload")
    parser.add_argument("--traces", required=True)
    parser.add_argument("--config", default=None)
    parser.add_argument("--policies", default="timely,vllm-stream")
    parser.add_argument("--seeds", type=int, default=2)
    args = parser.parse_args()

    import llm_planner.lrtrace.compare as compare_module
    from llm_planner.domain.clock import VirtualClock
    from llm_planner.engine.factory import make_watched_vllm_engine
    from llm_planner.engine.vllm_engine import VllmEngine
    from llm_planner.lrtrace.compare import compare, resolve_workload, variants
    from llm_planner.sched.batch import BatchController
    from llm_planner.settings.config import load_planner_config

    log: list[dict] = []
    current: dict = {"run": None}
    step, start, suspend = VllmEngine.step, VllmEngine._start, VllmEngine.suspend

    def counted_start(self, gen, urgency):
        self.started_since_step = getattr(self, "started_since_step", 0) + 1
        return start(self, gen, urgency)

    def logged_step(self):
        started, self.started_since_step = getattr(self, "started_since_step", 0), 0
        running = self.running
        batch, context = len(running), sum(self.context_tokens(g) for g in running)
        at = self.clock.now()
        result = step(self)
        log.append({"run": current["run"], "at": at, "duration": result.duration_s, "batch": batch,
                    "prefill": result.prefill_tokens, "started": started,
                    "profile": self.profile.predict_step_s(batch, context)})
        return result

    def logged_suspend(self, gen_id):
        log.append({"run": current["run"], "at": self.clock.now(), "event": "suspend"})
        return suspend(self, gen_id)

    weighed: dict[tuple, dict] = {}  # (run, task id) -> first forecast and times held back
    keeps_deadlines = BatchController._keeps_deadlines

    def logged_keeps_deadlines(self, batch, context, prefill, resumes, now, newcomer, entry, decision):
        admitted = keeps_deadlines(self, batch, context, prefill, resumes, now, newcomer, entry, decision)
        seen = weighed.setdefault((current["run"], newcomer.task_id), {"held": 0})
        if "forecast" not in seen:  # priced as BatchController._keeps_deadlines prices the newcomer
            first, step = self._newcomer_steps(batch, context, prefill, resumes, newcomer, now, decision)
            seen["forecast"] = now - entry.arrival_s + self._newcomer_segment_s(newcomer, first, step)
            seen["first"] = first
            seen["tokens"] = self._typical_remaining_tokens(newcomer)
        seen["held"] += not admitted
        return admitted

    simulate = compare_module.simulate

    def labelled(workload, traces, policy, config, seed, *rest, **kwargs):
        current["run"] = (str(policy), seed)
        return simulate(workload, traces, policy, config, seed, *rest, **kwargs)

    VllmEngine.step, VllmEngine._start, VllmEngine.suspend = logged_step, counted_start, logged_suspend
    BatchController._keeps_deadlines = logged_keeps_deadlines
    compare_module.simulate = labelled

    config = load_planner_config(args.config)
    source = resolve_workload(args.workload, args.traces, config)
    engine = make_watched_vllm_engine(config, VirtualClock(), None)
    runs_of = variants(args.policies.split(","), config)
    result = compare(source, runs_of, config, args.seeds, engine)

    errors = defaultdict(list)
    for row in log:
        if "duration" in row and row["prefill"] == 0 and row["started"] == 0 and row["batch"]:
            errors[row["batch"]].append((row["duration"], row["profile"]))
    print(f"decode-only iterations (calibrate: {config.vllm.calibrate}), median ms measured / profile, by batch:")
    print("  " + "  ".join(f"b{b}: {1000 * statistics.median(m for m, _ in rows):.0f} / "
                           f"{1000 * statistics.median(p for _, p in rows):.0f} (n={len(rows)})"
                           for b, rows in sorted(errors.items())))
    for variant in runs_of:
        policy = str(variant.policy)
        for seed, run in enumerate(result.runs[variant.label]):
            urgent = sorted((r for r in run.records if r.request.urgency_name == "urgent"),
                            key=lambda r: r.request.arrival_s)
            print(f"== {variant.label}, seed {seed}")
            for record in urgent:
                arrived = record.request.arrival_s
                sent = record.segments[0].dispatched_s if record.segments else float("nan")
                window = [row for row in log if row["run"] == (policy, seed)
                          and arrived - 0.01 < row["at"] + row.get("duration", 0.0) and row["at"] < sent]
                seen = weighed.get(((policy, seed), record.request.task_id))
                admission = (f"held back {seen['held']}x, forecast {seen['forecast']:.3f} s (first iteration "
                             f"{1000 * seen['first']:.0f} ms, {seen['tokens']} tokens); " if seen else "")
                text = record.segments[0].text if record.segments else ""
                print(f"  {record.request.task_id}: first segment {text!r} {sent - arrived:.3f} s after arrival, "
                      f"utility {record.utility:.2f} of {record.max_utility:.0f}; {admission}" + " ".join(
                          f"{row['at'] - arrived:+.2f}:S" if "event" in row else
                          f"{row['at'] - arrived:+.2f}:{row['duration'] * 1000:.0f}/{row['batch']}"
                          + (f"/pf{row['prefill']}" if row["prefill"] else "")
                          + (f"/n{row['started']}" if row["started"] else "")
                          for row in window))


if __name__ == "__main__":
    main()
