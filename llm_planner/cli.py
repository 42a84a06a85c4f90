"""`llm-planner`: maintenance commands (model cache, execution-time model fitting)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .exec_model import fit_exec_model, load_exec_model, read_samples_csv


def cmd_prepare(args) -> int:
    from .tokenizer import prepare

    print(f"tokenizer: {prepare()}")
    return 0


def cmd_fit_exec(args) -> int:
    base = load_exec_model(args.model)
    samples = read_samples_csv(args.samples, args.robot_type)
    if not samples:
        raise ValueError(f"{args.samples}: no samples")
    fitted = fit_exec_model(base, samples, degree=args.degree)
    text = fitted.to_yaml()
    if args.output:
        Path(args.output).write_text(text)
        print(f"wrote {args.output} ({len(samples)} samples, skills: {sorted({s.skill for s in samples})})")
    else:
        print(text)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="llm-planner", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("prepare", help="build the default tokenizer into the cache (idempotent)")
    p.set_defaults(func=cmd_prepare)
    p = sub.add_parser("fit", help="refit an execution-time model from recorded (skill, arg, seconds) samples")
    p.add_argument("samples", help="CSV with header skill,arg,seconds (arg may be empty)")
    p.add_argument("--model", required=True, help="base model: a robot type name (exec_models/) or a YAML path")
    p.add_argument("--robot-type", help="use only rows of this robot type (CSV with a robot_type column)")
    p.add_argument("--degree", type=int, default=1, help="polynomial degree for skills whose argument varies")
    p.add_argument("-o", "--output", help="write the refitted model here (default: print it)")
    p.set_defaults(func=cmd_fit_exec)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (ValueError, FileNotFoundError) as exc:
        print(f"llm-planner {args.command}: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
