"""`llm-planner`: maintenance commands (model cache, execution-time model fitting)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from .exec_model import fit_exec_model, load_exec_model, read_samples_csv


def cmd_prepare(args) -> int:
    from .tokenizer import prepare

    print(f"tokenizer: {prepare()}")
    if args.model:
        from .engine.models import prepare_default_model

        print(f"model: {prepare_default_model()}")
    return 0


def cmd_profile_engine(args) -> int:
    import platform

    from .clock import WallClock
    from .config import load_planner_config
    from .engine.factory import make_vllm_engine
    from .engine.profiler import EngineProfiler, fit_profile, profile_to_yaml

    config = load_planner_config(args.config)
    config = config.model_copy(update={"vllm": config.vllm.model_copy(update={"constrained": False})})
    engine = make_vllm_engine(config, WallClock(), args.model)
    measurements = EngineProfiler(engine).run(quick=args.quick)
    scheduler = engine.llm.vllm_config.scheduler_config
    hardware = args.hardware or f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores"
    profile = fit_profile(measurements, args.name, args.model_label or Path(engine.model_dir).name, hardware,
                          engine.kv_capacity_tokens, scheduler.max_num_batched_tokens, engine.block_size)
    text = profile_to_yaml(profile)
    if args.output:
        Path(args.output).write_text(text)
        print(f"wrote {args.output}")
    else:
        print(text)
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
    p = sub.add_parser("prepare", help="build the default tokenizer (and model) into the cache (idempotent)")
    p.add_argument("--model", action="store_true",
                   help="also convert the bundled SmolLM2 GGUF into a Hugging Face folder for vLLM")
    p.set_defaults(func=cmd_prepare)
    p = sub.add_parser("profile-engine", help="measure the vLLM engine and write an engine profile for `sim`")
    p.add_argument("--config", help="planner config whose vllm section is used (default: config/planner.yaml)")
    p.add_argument("--model", help="local HF model folder (default: the config's vllm.model)")
    p.add_argument("--name", default="measured", help="profile name")
    p.add_argument("--model-label", help="model description written into the profile")
    p.add_argument("--hardware", help="hardware description written into the profile")
    p.add_argument("--quick", action="store_true", help="fewer sizes and repeats (about a minute on a CPU)")
    p.add_argument("-o", "--output", help="write the profile here (default: print it)")
    p.set_defaults(func=cmd_profile_engine)
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
    except (ValueError, FileNotFoundError, RuntimeError) as exc:
        print(f"llm-planner {args.command}: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
