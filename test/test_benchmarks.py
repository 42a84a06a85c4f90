"""benchmarks/ holds the regression benchmarks that `make bench` and `make bench-engine` run,
each writing its result in the one schema; one-off studies live in scripts/investigations/."""

import json
import re
from pathlib import Path

import pytest

from llm_planner.testing.bench_result import SCHEMA, write_bench_result

ROOT = Path(__file__).resolve().parents[1]
HELPERS = {"rclpy_floor.py": "ros_overhead.py"}  # run by another benchmark, beside each of its scenarios


def _make_target_scripts() -> set[str]:
    makefile = (ROOT / "Makefile").read_text()
    scripts = set()
    for target in ("bench", "bench-engine"):
        recipe = re.search(rf"^{target}:.*\n((?:\t.*\n)+)", makefile, re.M)
        assert recipe, f"Makefile has no {target} target"
        scripts |= set(re.findall(r"benchmarks/(\w+\.py)", recipe.group(1)))
    return scripts


def test_every_benchmark_is_run_by_make_bench_and_writes_the_one_schema():
    run = _make_target_scripts()
    present = {p.name for p in (ROOT / "benchmarks").glob("*.py")}
    assert present - set(HELPERS) == run, "benchmarks/ and the bench targets differ"
    for helper, runner in HELPERS.items():
        assert helper in (ROOT / "benchmarks" / runner).read_text()
    for name in run:
        source = (ROOT / "benchmarks" / name).read_text()
        assert "write_bench_result(" in source, f"{name} does not write its result in the schema"
        assert "sys.path" not in source and "from test" not in source, f"{name} reaches into test/"


def test_the_result_names_its_benchmark_machine_and_command(tmp_path):
    path = write_bench_result(tmp_path / "r.json", "example", {"a_ms": 2.0}, {"x/b_over_a": 1.5}, "what it is")
    result = json.loads(path.read_text())
    assert result["benchmark"] == "example" and result["schema"] == SCHEMA
    assert result["figures"] == {"a_ms": 2.0} and result["ratios"] == {"x/b_over_a": 1.5}
    assert result["machine"]["cores"] >= 1 and result["machine"]["cpu_class"]
    assert result["command"]


CHILD = """import argparse, json, sys
from pathlib import Path
p = argparse.ArgumentParser()
p.add_argument("--dtype")
p.add_argument("--json")
a = p.parse_args()
if a.dtype == "broken":
    print("no engine for broken", file=sys.stderr)
    sys.exit(3)
Path(a.json).write_text(json.dumps({"dtype": a.dtype}))
"""


def test_a_child_process_per_engine_setting_returns_what_it_wrote_or_its_failure(tmp_path, capsys):
    from llm_planner.testing.engine_runs import run_in_child

    script = tmp_path / "child.py"
    script.write_text(CHILD)
    assert [run_in_child(str(script), "--dtype", d) for d in ("bfloat16", "float32")] == [
        {"dtype": "bfloat16"}, {"dtype": "float32"}]
    with pytest.raises(SystemExit) as failed:
        run_in_child(str(script), "--dtype", "broken")
    assert failed.value.code == 3
    assert "no engine for broken" in capsys.readouterr().err
