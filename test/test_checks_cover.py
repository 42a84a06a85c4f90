"""The code checks of `make test` reach every Python file of the project, so none can rot
unseen: ruff lints all of them (ruff.toml) and mypy checks all but the launch files
(setup.cfg: a `launch/` folder would hide ROS 2's `launch` package from it), the package's
functions without annotations included."""

import configparser
import fnmatch
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Made by the set-up, the build or the runs, not written: no checks there.
GENERATED = {"build", "install", "log", "out"}  # and hidden folders (.venv, .cache, ...)
NOT_TYPE_CHECKED = {"launch"}


def python_folders() -> set[str]:
    """The top-level folders holding Python files ("." for the root's own)."""
    folders = {"."} if any(ROOT.glob("*.py")) else set()
    for folder in ROOT.iterdir():
        made = folder.name in GENERATED or folder.name.startswith(".") or folder.name.endswith(".egg-info")
        if folder.is_dir() and not made and any(folder.rglob("*.py")):
            folders.add(folder.name)
    return folders


def test_mypy_checks_every_folder_of_python_but_the_launch_files():
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg")
    checked = {f.strip() for f in config["mypy"]["files"].split(",")}
    assert "llm_planner" in checked
    assert python_folders() - {"."} - NOT_TYPE_CHECKED <= checked
    # the package's functions are checked whether or not they carry annotations
    assert config["mypy-llm_planner.*"].getboolean("check_untyped_defs")


def test_ruff_lints_every_python_file_and_format_checks_the_package():
    ruff = tomllib.loads((ROOT / "ruff.toml").read_text())
    included = ruff["include"]
    for folder in python_folders():
        probe = "setup.py" if folder == "." else f"{folder}/a/b.py"
        assert any(fnmatch.fnmatch(probe, pattern) for pattern in included), f"ruff does not lint {folder}/"
    unformatted = ruff["format"]["exclude"]
    assert not any(fnmatch.fnmatch("llm_planner/a/b.py", pattern) for pattern in unformatted)
