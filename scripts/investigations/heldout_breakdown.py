"""The held-out part of the tuning corpus in two: tasks of a kind the tuning saw, asked in a
new phrasing, and tasks of a kind it never saw (templates held out whole), for the tuned model
and the base model of one `llm-planner plans ... --against ... --json` output.

    python scripts/investigations/heldout_breakdown.py docs/results/plans/tuned-heldout.json
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

CORPUS = Path("config/tuning/adapter/corpus.jsonl")  # the corpus the committed adapter was tuned on


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("plans_json")
    parser.add_argument("--corpus", default=str(CORPUS))
    args = parser.parse_args()
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


if __name__ == "__main__":
    raise SystemExit(main())
