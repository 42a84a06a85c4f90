"""The engine's configuration follows the machine: CPU class and dtype from /proc/cpuinfo flags,
engine profiles per model, dtype and CPU class (no vLLM needed)."""

import pytest

from llm_planner.engine.cpu import parse_cpuinfo
from llm_planner.engine.profile import (
    find_machine_profile,
    load_engine_profile,
    machine_profile_key,
    resolve_engine_profile_path,
)

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


def test_every_supported_cpu_class_with_a_committed_profile_resolves(monkeypatch, tmp_path):
    monkeypatch.setenv("LLM_PLANNER_CACHE", str(tmp_path))  # no profile measured "here"
    for dtype, cpu_class in (("float32", "avx2"), ("bfloat16", "avx512-bf16")):
        key = machine_profile_key("smollm2-135m-instruct", dtype, cpu_class)
        path = resolve_engine_profile_path("auto", key)
        profile = load_engine_profile(path)
        assert profile.name == key
        assert profile.decode_base_s > 0 and profile.prefill_s_per_token > 0


def test_a_profile_measured_on_this_machine_comes_before_the_committed_one(monkeypatch, tmp_path):
    monkeypatch.setenv("LLM_PLANNER_CACHE", str(tmp_path))
    key = machine_profile_key("smollm2-135m-instruct", "float32", "avx2")
    committed = find_machine_profile(key)
    assert committed is not None and tmp_path not in committed.parents
    measured = tmp_path / "engine_profiles" / f"{key}.yaml"
    measured.parent.mkdir()
    measured.write_text(committed.read_text())
    assert find_machine_profile(key) == measured


def test_a_missing_machine_profile_says_how_to_measure_one(monkeypatch, tmp_path):
    monkeypatch.setenv("LLM_PLANNER_CACHE", str(tmp_path))
    key = machine_profile_key("my-model", "float32", "avx512")
    with pytest.raises(FileNotFoundError, match="profile-engine --save"):
        resolve_engine_profile_path("auto", key)
    # a named profile is used as it is, whatever the machine
    assert resolve_engine_profile_path("llama3-8b-fp16-rtx4090", key).stem == "llama3-8b-fp16-rtx4090"


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
