"""Remake or check every simulated result under docs/results (listed in docs/results/simulated.yaml).

    python -m llm_planner.commands.results list      # each result, its command, whether it is stored
    python -m llm_planner.commands.results check     # rerun each; exit 1 if one differs (`make check-results`)
    python -m llm_planner.commands.results remake    # rewrite the JSON and text (`make results`)

`--only GLOB` picks results by their path under docs/results.

The simulation is deterministic for a seed, so `check` compares exactly: a difference means the
stored result was made by other code or settings. Runs go in parallel (`--jobs`, default: the
number of CPUs); each is an `lrtrace` process of its own.
"""

from __future__ import annotations

import argparse
import fnmatch
import itertools
import json
import math
import os
import re
import shlex
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "docs" / "results"
MANIFEST = RESULTS / "simulated.yaml"
BASE_CONFIG = ROOT / "config" / "planner.yaml"
# The environment's own command where it is installed beside this python (a venv not on PATH).
_BESIDE = Path(sys.executable).with_name("lrtrace")
LRTRACE = str(_BESIDE) if _BESIDE.exists() else "lrtrace"


@dataclass(frozen=True)
class Run:
    out: str  # path under docs/results, without suffix
    args: list[str]  # lrtrace arguments after the config, `{out}` not yet filled in
    config: str | None  # a name under the manifest's configs

    def command(self, config_dir: Path, stem: Path) -> list[str]:
        args = [a.replace("{out}", str(stem)) for a in self.args]
        if "--plots" not in args:
            args.append("--no-plots")
        config = ["--config", str(config_dir / f"{self.config}.yaml")] if self.config else []
        return [LRTRACE, *config, *args, "--json", f"{stem}.json", "--quiet"]


def load_manifest(path: Path = MANIFEST) -> tuple[dict[str, dict], list[str], list[Run]]:
    manifest = yaml.safe_load(path.read_text())
    configs = manifest.get("configs") or {}
    runs = []
    for entry in manifest["runs"]:
        axes = entry.get("for") or {}
        for values in itertools.product(*axes.values()):
            fill = {f"{{{name}}}": str(value) for name, value in zip(axes, values)}
            out, run, config = (_fill(entry.get(key), fill) for key in ("out", "run", "config"))
            unfilled = sorted(set(re.findall(r"\{(\w+)\}", f"{out} {run} {config}")) - {"out"})
            if unfilled:
                raise ValueError(f"{path}: {out}: no `for` values for {', '.join(unfilled)}")
            if out is None or run is None:
                raise ValueError(f"{path}: every run needs `out` and `run` ({entry})")
            if config is not None and config not in configs:
                raise ValueError(f"{path}: {out} names config {config!r}, which is not under configs")
            runs.append(Run(out, shlex.split(run), config))
    outs = [r.out for r in runs]
    repeated = sorted({o for o in outs if outs.count(o) > 1})
    if repeated:
        raise ValueError(f"{path}: more than one run writes {', '.join(repeated)}")
    return configs, manifest.get("inputs") or [], runs


def _fill(text: str | None, fill: dict[str, str]) -> str | None:
    if text is None:
        return None
    for key, value in fill.items():
        text = text.replace(key, value)
    return text


def write_configs(configs: dict[str, dict], folder: Path) -> None:
    """Each named config: the base config with its dotted settings replaced."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, changes in configs.items():
        config = yaml.safe_load(BASE_CONFIG.read_text())
        for dotted, value in changes.items():
            *parents, leaf = dotted.split(".")
            node = config
            for key in parents:
                node = node.get(key) if isinstance(node, dict) else None
            if not isinstance(node, dict) or leaf not in node:
                raise ValueError(f"config {name}: {dotted} is not a setting of {BASE_CONFIG.name}")
            node[leaf] = value
        (folder / f"{name}.yaml").write_text(yaml.safe_dump(config, sort_keys=False))


def make_inputs(inputs: list[str], runs: list[Run]) -> None:
    """The inputs the runs read (each command's `-o` file), made afresh."""
    for line in inputs:
        args = shlex.split(line)
        output = args[args.index("-o") + 1]
        if any(output in run.args for run in runs):
            (ROOT / output).parent.mkdir(parents=True, exist_ok=True)
            subprocess.run([LRTRACE, *args], cwd=ROOT, check=True, stdout=subprocess.DEVNULL)


def differences(stored, now, where: str = "") -> list[str]:
    """Where two results differ: `label / level / metric: stored -> now`."""
    if isinstance(stored, dict) and isinstance(now, dict):
        found = [f"{where}{key}: only in the stored result" for key in sorted(stored.keys() - now.keys())]
        found += [f"{where}{key}: only in the rerun" for key in sorted(now.keys() - stored.keys())]
        for key in [key for key in stored if key in now]:
            found += differences(stored[key], now[key], f"{where}{key} / ")
        return found
    if isinstance(stored, (int, float)) and isinstance(now, (int, float)):
        same = stored == now or (math.isnan(stored) and math.isnan(now))
        return [] if same else [f"{where.removesuffix(' / ')}: {stored} -> {now}"]
    return [] if stored == now else [f"{where.removesuffix(' / ')}: {stored!r} -> {now!r}"]


def run_one(run: Run, config_dir: Path, stem: Path) -> subprocess.CompletedProcess:
    stem.parent.mkdir(parents=True, exist_ok=True)
    # Paths in the repository go in relative, so the printed text names them as the docs do.
    shown = stem.relative_to(ROOT) if stem.is_relative_to(ROOT) else stem
    return subprocess.run(run.command(config_dir, shown), cwd=ROOT, capture_output=True, text=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("action", choices=("list", "check", "remake"))
    parser.add_argument("--only", default="*", help="results whose path under docs/results matches this glob")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--manifest", type=Path, default=MANIFEST)
    parser.add_argument("--stored", type=Path, default=RESULTS, help="the folder the results are stored in")
    args = parser.parse_args(argv)
    stored = args.stored.resolve()

    configs, inputs, runs = load_manifest(args.manifest)
    runs = [r for r in runs if fnmatch.fnmatch(r.out, args.only)]
    if not runs:
        print(f"no result matches {args.only!r}", file=sys.stderr)
        return 2
    if args.action == "list":
        for r in runs:
            there = "stored" if (stored / f"{r.out}.json").is_file() else "NOT STORED"
            config = f"--config {r.config} " if r.config else ""
            print(f"{r.out:55s} {there:10s} lrtrace {config}{shlex.join(r.args)}")
        return 0

    with tempfile.TemporaryDirectory(prefix="sim-results-") as tmp:
        config_dir = Path(tmp) / "configs"
        write_configs(configs, config_dir)
        make_inputs(inputs, runs)
        into = stored if args.action == "remake" else Path(tmp) / "results"
        with ThreadPoolExecutor(max(1, args.jobs)) as pool:
            pending = {pool.submit(run_one, run, config_dir, into / run.out): run for run in runs}
            failed = 0
            for number, future in enumerate(as_completed(pending), 1):  # each as it ends: progress
                run = pending[future]
                failed += not report(
                    run,
                    future.result(),
                    into / run.out,
                    stored if args.action == "check" else None,
                    f"[{number}/{len(runs)}]",
                )
    print(f"{len(runs) - failed} of {len(runs)} {'the same as stored' if args.action == 'check' else 'remade'}")
    return 1 if failed else 0


def report(
    run: Run, process: subprocess.CompletedProcess, stem: Path, check_against: Path | None, counter: str
) -> bool:
    """Prints how one run went; True when it was remade, or is the same as its stored result."""
    if process.returncode != 0:
        print(f"{counter} {run.out}: lrtrace failed (exit {process.returncode})\n{process.stderr[-2000:]}")
        return False
    if check_against is None:
        Path(f"{stem}.txt").write_text(process.stdout)
        print(f"{counter} {run.out}: written")
        return True
    stored_path = check_against / f"{run.out}.json"
    if not stored_path.is_file():
        print(f"{counter} {run.out}: not stored")
        return False
    found = differences(json.loads(stored_path.read_text()), json.loads(Path(f"{stem}.json").read_text()))
    plural = "s" * (len(found) > 1)
    print(f"{counter} {run.out}: " + (f"{len(found)} difference{plural}" if found else "same"))
    for line in found[:20]:
        print(f"    {line}")
    if len(found) > 20:
        print(f"    ... and {len(found) - 20} more")
    return not found


if __name__ == "__main__":
    sys.exit(main())
