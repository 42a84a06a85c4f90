"""The engine's configuration follows the machine: CPU class and dtype from /proc/cpuinfo flags,
engine profiles per model, dtype and CPU class (no vLLM needed)."""

import logging
import re
from pathlib import Path

import pytest

from llm_planner.engine.cpu import parse_cpuinfo
from llm_planner.engine.factory import resolve_vllm_setup
from llm_planner.engine.profile import ProfileKey, choose_engine_profile, find_machine_profile, load_engine_profile

CPUINFO = """processor\t: 0
vendor_id\t: {vendor}
model name\t: {model}
flags\t\t: fpu sse2 {flags}

processor\t: 1
model name\t: {model}
flags\t\t: fpu sse2 {flags}
"""


def cpu(flags: str, model: str = "Test CPU", arch: str = "x86_64"):
    return parse_cpuinfo(CPUINFO.format(vendor="x", model=model, flags=flags), arch, 2)


@pytest.mark.parametrize("flags, cpu_class, dtype", [
    ("avx avx2 fma", "avx2", "float32"),  # AMD EPYC here: bf16 emulated, 4-5x slower prefill
    ("avx2 avx512f avx512bw", "avx512", "float32"),  # AVX-512 without bf16 still emulates it
    ("avx2 avx512f avx512_bf16", "avx512-bf16", "bfloat16"),
    ("avx2 avx512f amx_bf16 amx_tile", "avx512-bf16", "bfloat16"),
])
def test_cpu_class_and_dtype_follow_the_flags(flags, cpu_class, dtype):
    info = cpu(flags)
    assert info.cpu_class == cpu_class
    assert info.best_dtype == dtype
    assert info.unsupported_reason() is None
    assert info.model == "Test CPU" and info.cores == 2


def test_cpu_without_avx2_or_not_x86_is_unsupported_with_a_reason():
    old = cpu("avx sse4_2", model="Old Xeon")
    assert old.cpu_class == "unsupported"
    assert "AVX2" in old.unsupported_reason() and "Old Xeon" in old.unsupported_reason()
    arm = parse_cpuinfo("Features\t: fp asimd\n", "aarch64", 4)
    assert "x86-64" in arm.unsupported_reason() and arm.cpu_class == "unsupported"


# Each CPU class this kind of machine comes with, by its flags (as /proc/cpuinfo lists them).
CPU_CLASSES = {
    "AVX2 only (AMD EPYC)": "avx avx2 fma",
    "AVX-512 without bf16": "avx2 avx512f avx512bw avx512vl",
    "AVX-512 with avx512_bf16 (AMD EPYC)": "avx2 avx512f avx512bw avx512_bf16",
    "AMX (Intel Xeon)": "avx2 avx512f avx512bw avx512_bf16 amx_bf16 amx_tile amx_int8",
}
MODEL = "smollm2-135m-instruct"
ROOT = Path(__file__).resolve().parents[1]


def main_job_pace_reference() -> str:
    """The profile `make demo` paces its workload by (--pace-engine in the Makefile)."""
    demo = ROOT.joinpath("Makefile").read_text().split("\ndemo:", 1)[1].split("\n\n", 1)[0]
    pace = re.search(r"--pace-engine (\S+)", demo)
    assert pace, "make demo names no --pace-engine"
    return pace.group(1)


@pytest.fixture
def nothing_measured_here(monkeypatch, tmp_path):
    monkeypatch.setenv("LLM_PLANNER_CACHE", str(tmp_path))  # no profile measured on "this" machine
    return tmp_path


@pytest.mark.parametrize("dtype", [None, "float32", "bfloat16"], ids=["config's dtype", "float32", "bfloat16"])
@pytest.mark.parametrize("cpu_name", list(CPU_CLASSES))
def test_every_cpu_class_resolves_the_engine_and_the_main_jobs_pace_in_every_dtype(
        config, nothing_measured_here, cpu_name, dtype):
    """dtype -> profile -> the main job's pace, as the real engine and `make demo` resolve them,
    for a CPU of each class: never an error for want of a profile file."""
    from llm_planner.lrtrace.compare import resolve_workload
    from llm_planner.lrtrace.pace import pace_for

    info = cpu(CPU_CLASSES[cpu_name])
    engine_args = {**config.vllm.engine_args, **({"dtype": dtype} if dtype else {})}
    setup = resolve_vllm_setup(config.vllm.model_copy(update={"engine_args": engine_args}), MODEL, info)
    assert setup.dtype == (dtype or info.best_dtype) == setup.engine_args["dtype"]
    assert setup.profile.key == ProfileKey(MODEL, setup.dtype, info.cpu_class)
    profile = setup.profile.profile
    assert profile.decode_base_s > 0 and profile.prefill_s_per_token > 0
    stand_in = ProfileKey.parse(setup.profile.path.stem)
    assert stand_in.model == MODEL and stand_in.cpu_class is not None  # this model's timing, on a CPU

    source = resolve_workload("config/jobs/urgent_under_load.yaml", "config/traces/timely_tasks.yaml", config)
    pace = pace_for(profile, load_engine_profile(main_job_pace_reference()), len(source.workload(1).jobs), config)
    assert pace.here_s > 0 and pace.reference_s > 0 and pace.slowdown >= 1.0
    assert 60 < pace.grace_s() < 3600


@pytest.mark.parametrize("cpu_class, dtype", [("avx2", "float32"), ("avx512-bf16", "bfloat16"),
                                              ("avx512-bf16", "float32")])
def test_the_dtypes_the_code_chooses_have_a_committed_profile(nothing_measured_here, cpu_class, dtype):
    """The main job's dtype on each measured class, and float32 (the engine tests' dtype)."""
    key = ProfileKey(MODEL, dtype, cpu_class)
    choice = choose_engine_profile("auto", key)
    assert (choice.source, choice.path.stem) == ("committed for its CPU class", key.name)
    assert choice.profile.name == key.name


@pytest.mark.parametrize("key, expected", [
    # float32 runs the same AVX-512 kernels with or without native bf16
    (ProfileKey(MODEL, "float32", "avx512"), f"{MODEL}-float32-cpu-avx512-bf16"),
    # emulated bf16 on AVX2: the class matters more than the dtype
    (ProfileKey(MODEL, "bfloat16", "avx2"), f"{MODEL}-float32-cpu-avx2"),
    (ProfileKey(MODEL, "bfloat16", "avx512"), f"{MODEL}-bfloat16-cpu-avx512-bf16"),
    (ProfileKey("my-model", "float32", "avx2"), f"{MODEL}-float32-cpu-avx2"),
    (ProfileKey("my-model", "float16", None), "llama3-8b-fp16-rtx4090"),  # a GPU: the reference GPU
])
def test_a_missing_profile_gets_the_nearest_stand_in_with_a_warning_that_says_how_to_measure(
        nothing_measured_here, caplog, key, expected):
    with caplog.at_level(logging.WARNING, logger="llm_planner.engine.profile"):
        choice = choose_engine_profile("auto", key)
    assert choice.is_stand_in and choice.path.stem == expected and choice.key == key
    assert f"no profile for {key.name}" in caplog.text
    assert f"profile-engine --save --dtype {key.dtype}" in caplog.text


def test_a_profile_measured_on_this_machine_comes_before_the_committed_one_and_any_stand_in(nothing_measured_here):
    committed_key = ProfileKey(MODEL, "float32", "avx2")
    committed = find_machine_profile(committed_key)
    assert committed is not None and nothing_measured_here not in committed.path.parents
    measured_dir = nothing_measured_here / "engine_profiles"
    measured_dir.mkdir()
    for key in (committed_key, ProfileKey(MODEL, "float32", "avx512")):
        (measured_dir / f"{key.name}.yaml").write_text(committed.path.read_text())
        choice = choose_engine_profile("auto", key)
        assert (choice.path, choice.source) == (measured_dir / f"{key.name}.yaml", "measured on this machine")


def test_a_named_profile_is_used_as_it_is_whatever_the_machine(nothing_measured_here):
    choice = choose_engine_profile("llama3-8b-fp16-rtx4090", ProfileKey("my-model", "float32", "avx512"))
    assert choice.path.stem == "llama3-8b-fp16-rtx4090" and not choice.is_stand_in


def test_profile_keys_round_trip_through_their_names():
    for key in (ProfileKey(MODEL, "bfloat16", "avx512-bf16"), ProfileKey(MODEL, "float32", "avx512"),
                ProfileKey("Llama-3-8B", "float16", None)):
        assert ProfileKey.parse(key.name) == key
    assert ProfileKey.parse("llama3-8b-fp16-rtx4090") is None


def test_generation_time_grows_with_the_workload_and_follows_the_profile():
    avx2 = load_engine_profile("smollm2-135m-instruct-float32-cpu-avx2")
    native = load_engine_profile("smollm2-135m-instruct-bfloat16-cpu-avx512-bf16")
    one = avx2.generation_s(1, 96, 100, 32)
    assert one == pytest.approx(100 * avx2.prefill_s_per_token + 96 * avx2.step_s(1, 148))
    assert avx2.generation_s(20, 96, 100, 32) > one  # more plans, bigger batch steps
    assert avx2.generation_s(64, 96, 100, 32) > 2 * avx2.generation_s(32, 96, 100, 32) * 0.99  # two waves
    assert avx2.generation_s(0, 96, 100, 32) == 0.0
    # the demo's pacing: this AVX2 machine's engine is slower than the native-bf16 one
    assert avx2.generation_s(20, 96, 100, 32) > 1.5 * native.generation_s(20, 96, 100, 32)
