"""The held-out part of the tuning corpus in two: tasks of a kind the tuning saw, asked in a
new phrasing, and tasks of a kind it never saw (templates held out whole), for the tuned model
and the base model of one `llm-planner plans ... --against ... --json` output.

    python scripts/investigations/heldout_breakdown.py docs/results/plans/tuned-heldout.json

`--by-template OTHER.json`: instead, the tasks each template's held-out tasks do, for this
output's model against OTHER's (another model on the same tasks), largest differences first.
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

CORPUS = Path("config/tuning/adapter/corpus.jsonl")  # the narrow corpus, beside the bundled adapter


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("plans_json")
    parser.add_argument("--corpus", default=str(CORPUS))
    parser.add_argument("--by-template", metavar="OTHER_JSON", help="compare per template with this output's model")
    args = parser.parse_args()
    if args.by_template:
        mine, other = (json.loads(Path(name).read_text()) for name in (args.plans_json, args.by_template))
        return by_template(mine, other)
    corpus = [json.loads(line) for line in Path(args.corpus).read_text().splitlines() if line.strip()]
    by_id = {row["id"]: row for row in corpus}
    tuned_kinds = {(row["skill_set"], row["template"]) for row in corpus if row["split"] == "tune"}
    result = json.loads(Path(args.plans_json).read_text())
    print("| model | held-out tasks | tasks | valid | cut | does the task |")
    print("|---|---|---|---|---|---|")
    for report in (result, result.get("against") or {}):
        if not report:
            continue
        groups: dict[str, list[dict]] = defaultdict(list)
        for plan in report["plans"]:
            row = by_id[plan["id"]]
            seen = (row["skill_set"], row["template"]) in tuned_kinds
            groups["a kind it was tuned on, new phrasing" if seen else "a kind it never saw"].append(plan)
        for group, plans in sorted(groups.items()):
            n = len(plans)
            print(f"| {report['model']} | {group} | {n} | {100 * sum(p['valid'] for p in plans) / n:.0f}% "
                  f"| {100 * sum(p['truncated'] for p in plans) / n:.0f}% "
                  f"| {100 * sum(p['does_task'] for p in plans) / n:.0f}% |")
    return 0


def by_template(mine: dict, other: dict) -> int:
    done: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])  # tasks, done by mine, done by other
    theirs = {plan["id"]: plan for plan in other["plans"]}
    for plan in mine["plans"]:
        counts = done[plan["id"].rsplit("/", 1)[0]]
        counts[0] += 1
        counts[1] += plan["does_task"]
        counts[2] += theirs[plan["id"]]["does_task"]
    print(f"| template | tasks | {mine['model']} | {other['model']} |")
    print("|---|---|---|---|")
    for template, (n, a, b) in sorted(done.items(), key=lambda item: (item[1][1] - item[1][2], item[0])):
        if a != b:
            print(f"| {template} | {n} | {a} | {b} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
