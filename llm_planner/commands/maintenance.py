"""`llm-planner`: maintenance commands (model cache, engine profiles, execution-time model
fitting) and the plan benchmark."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from llm_planner.catalog.exec_model import fit_exec_model, load_exec_model, read_samples_csv
from llm_planner.commands import plans, predictor, tuning


def cmd_prepare(args) -> int:
    from llm_planner.catalog.tokenizer import prepare

    print(f"tokenizer: {prepare()}")
    if args.model:
        from llm_planner.engine.models import adapter_dir, prepare_default_model, prepare_tuned_model

        print(f"model: {prepare_default_model()}")
        if (adapter_dir() / "adapter_model.safetensors").is_file():
            print(f"tuned model: {prepare_tuned_model()}")
    return 0


CONFIG_DTYPE = "config"  # `--dtype config`: the dtype the config gives this machine (the main job's)


def start_profiling_engine(args, dtype: str = CONFIG_DTYPE):
    """The configured real engine without the grammar (profiles time the bare engine), in
    `dtype`, with this machine's profile (or its stand-in)."""
    from llm_planner.domain.clock import WallClock
    from llm_planner.engine.factory import make_vllm_engine
    from llm_planner.settings.config import load_planner_config

    config = load_planner_config(args.config)
    if dtype != CONFIG_DTYPE:
        config = config.with_engine_dtype(dtype)
    config = config.model_copy(
        update={"vllm": config.vllm.model_copy(update={"constrained": False, "engine_profile": "auto"})}
    )
    return make_vllm_engine(config, WallClock(), args.model)


def _measure_profile(
    engine, quick: bool, output: Path | None, name: str, model_label: str | None = None, hardware: str | None = None
) -> None:
    """Measure and fit a profile, print the engine's overhead over the bare model, and write
    the profile to `output` (None: print it)."""
    from llm_planner.engine.cpu import cpu_info
    from llm_planner.engine.profiler import EngineProfiler, fit_profile, profile_to_yaml

    measurements = EngineProfiler(engine).run(quick=quick)
    hardware = hardware or (
        f"{cpu_info().describe()}; {engine.dtype}; vllm {engine.vllm_version}; "
        f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS')}"
    )
    profile = fit_profile(
        measurements,
        name,
        model_label or Path(engine.model_dir).name,
        hardware,
        engine.kv_capacity_tokens,
        engine.max_batched_tokens,
        engine.block_size,
    )
    _print_overhead(measurements, engine)
    text = profile_to_yaml(profile)
    if output is None:
        print(text)
        return
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(text)
    print(f"wrote {output}")


def _print_overhead(measurements, engine) -> None:
    """vLLM against the bare model's forward pass (transformers, same dtype and threads), at the
    same sizes: a 256-token cold prefill and a batch-1 decode step at a 256-token context."""
    from llm_planner.engine.profiler import bare_model_forward

    tokens = 256
    prefill = dict(measurements.prefill).get(tokens)
    step = next((s for b, c, s in measurements.decode if b == 1 and c == tokens), None)
    bare_prefill, bare_step = bare_model_forward(engine.model_dir, engine.dtype, prompt_tokens=tokens)
    print(f"bare model in transformers ({engine.dtype}, same threads), for the engine's overhead:")
    print(f"  {'':30s} {'vLLM':>10s} {'bare model':>11s} {'overhead':>9s}")
    for what, engine_s, bare in (
        (f"prefill, cold, per token ({tokens})", prefill / tokens if prefill else None, bare_prefill),
        (f"decode step, batch 1 (context {tokens})", step, bare_step),
    ):
        if engine_s is not None:
            print(f"  {what:30s} {engine_s * 1000:7.2f} ms {bare * 1000:8.2f} ms {(engine_s / bare - 1) * 100:+8.0f}%")


def cmd_profile_engine(args) -> int:
    from llm_planner.engine.profile import measured_profiles_dir

    engine = start_profiling_engine(args, args.dtype)
    name = args.name or engine.profile_choice.key.name
    output = Path(args.output) if args.output else (measured_profiles_dir() / f"{name}.yaml" if args.save else None)
    _measure_profile(engine, args.quick, output, name, args.model_label, args.hardware)
    return 0


def checked_dtypes(requested: list[str] | None, config_dtype: str) -> list[str]:
    """The distinct dtypes asked for, in order, `config` standing for the config's choice."""
    return list(
        dict.fromkeys(config_dtype if dtype == CONFIG_DTYPE else dtype for dtype in requested or [CONFIG_DTYPE])
    )


def cmd_check_engine(args) -> int:
    """Set-up's check, for each dtype asked for: does this machine's engine profile describe it?
    Where it has none of its own (a stand-in) or is more than the tolerance off, this machine
    is measured (--quick) into the project cache, which `auto` finds first from then on."""
    import gc

    from llm_planner.engine.cpu import cpu_info
    from llm_planner.engine.factory import engine_dtype
    from llm_planner.engine.vllm_engine import on_cpu
    from llm_planner.settings.config import load_planner_config

    print(f"CPU: {cpu_info().describe()}")
    config_dtype = engine_dtype(load_planner_config(args.config).vllm.engine_args, cpu_info() if on_cpu() else None)
    for dtype in checked_dtypes(args.dtype, config_dtype):
        engine = start_profiling_engine(args, dtype)
        _check_or_measure(engine, args.tolerance)
        del engine  # one engine at a time
        gc.collect()
    return 0


def _check_or_measure(engine, tolerance: float) -> None:
    from llm_planner.engine.profile import measured_profiles_dir
    from llm_planner.engine.profiler import EngineProfiler, check_profile

    choice = engine.profile_choice
    print(f"engine: vLLM {engine.dtype}, profile key {choice.key.name}")
    if choice.is_stand_in:
        print(
            f"no engine profile for this model, dtype and CPU class (stand-in: {choice.path.stem}): "
            f"measuring this machine (--quick)"
        )
    else:
        check = check_profile(EngineProfiler(engine, log=lambda _: None), engine.profile)
        print(f"profile {choice.path} ({choice.source}):")
        print(check.table())
        worst = check.worst_error()
        if worst <= tolerance:
            print(f"this machine matches its engine profile within {worst * 100:.0f}%")
            return
        print(
            f"this machine is {worst * 100:.0f}% off its engine profile (over {tolerance * 100:.0f}%): "
            f"measuring this machine (--quick), used from then on"
        )
    _measure_profile(engine, True, measured_profiles_dir() / f"{choice.key.name}.yaml", choice.key.name)


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
    p.add_argument(
        "--model",
        action="store_true",
        help="also convert the bundled SmolLM2 GGUF into a Hugging Face folder for vLLM, and merge "
        "the committed tuned adapter into the planner model's folder",
    )
    p.set_defaults(func=cmd_prepare)
    p = sub.add_parser("profile-engine", help="measure the vLLM engine and write an engine profile for `sim`")
    p.add_argument("--config", help="planner config whose vllm section is used (default: config/planner.yaml)")
    p.add_argument("--model", help="local HF model folder (default: the config's vllm.model)")
    p.add_argument(
        "--dtype",
        default=CONFIG_DTYPE,
        help="measure the engine in this dtype (default: the config's choice for this machine)",
    )
    p.add_argument("--name", help="profile name (default: model-dtype-cpu-class, the name `auto` looks for)")
    p.add_argument("--model-label", help="model description written into the profile")
    p.add_argument("--hardware", help="hardware description written into the profile (default: CPU, dtype, vLLM)")
    p.add_argument("--quick", action="store_true", help="fewer sizes and repeats (2-10 minutes on a CPU)")
    p.add_argument(
        "--save",
        action="store_true",
        help="write it where `vllm.engine_profile: auto` finds it first (the project cache)",
    )
    p.add_argument("-o", "--output", help="write the profile here (default: print it)")
    p.set_defaults(func=cmd_profile_engine)
    p = sub.add_parser(
        "check-engine",
        help="quick check that this machine's engine profile describes it "
        "(measures this machine where it has none, or is off)",
    )
    p.add_argument(
        "--dtype",
        action="append",
        help="check the engine in this dtype; repeat for several (default: `config`, the config's "
        "choice for this machine)",
    )
    p.add_argument("--config", help="planner config whose vllm section is used (default: config/planner.yaml)")
    p.add_argument("--model", help="local HF model folder (default: the config's vllm.model)")
    p.add_argument(
        "--tolerance", type=float, default=0.3, help="measure this machine above this relative error (default 0.3)"
    )
    p.set_defaults(func=cmd_check_engine)
    p = sub.add_parser("fit", help="refit an execution-time model from recorded (skill, arg, seconds) samples")
    p.add_argument("samples", help="CSV with header skill,arg,seconds (arg may be empty)")
    p.add_argument("--model", required=True, help="base model: a robot type name (exec_models/) or a YAML path")
    p.add_argument("--robot-type", help="use only rows of this robot type (CSV with a robot_type column)")
    p.add_argument("--degree", type=int, default=1, help="polynomial degree for skills whose argument varies")
    p.add_argument("-o", "--output", help="write the refitted model here (default: print it)")
    p.set_defaults(func=cmd_fit_exec)
    plans.add_parser(sub)
    predictor.add_parser(sub)
    tuning.add_parser(sub)
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
