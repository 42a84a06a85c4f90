"""Where the package's data (skills/, exec_models/, config/) and caches live.

Source checkouts keep the data beside the Python package; colcon/pip installs put it under
`<prefix>/share/llm_planner`. LLM_PLANNER_SHARE overrides both.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

_DATA_DIRS = ("skills", "exec_models", "config")


def share_dir() -> Path:
    env = os.environ.get("LLM_PLANNER_SHARE")
    if env:
        return Path(env)
    source_root = Path(__file__).resolve().parents[2]
    if all((source_root / d).is_dir() for d in _DATA_DIRS):
        return source_root
    try:  # a colcon/ament install
        from ament_index_python.packages import PackageNotFoundError, get_package_share_directory

        return Path(get_package_share_directory("llm_planner"))
    except (ImportError, PackageNotFoundError):
        pass
    installed = Path(sys.prefix) / "share" / "llm_planner"
    if installed.is_dir():
        return installed
    raise FileNotFoundError(
        "cannot find llm_planner's data folders (skills/, exec_models/, config/); "
        "set LLM_PLANNER_SHARE to the folder that holds them"
    )


def data_path(*parts: str) -> Path:
    return share_dir().joinpath(*parts)


def cache_dir() -> Path:
    """Project-owned cache (tokenizers, converted models); created on demand."""
    path = Path(os.environ.get("LLM_PLANNER_CACHE", Path.home() / ".cache" / "llm_planner"))
    path.mkdir(parents=True, exist_ok=True)
    return path


def resolve_resource(name_or_path: str | os.PathLike, folder: str, suffix: str = ".yaml") -> Path:
    """A file path as given, or a named resource in the data folder (`tello` -> exec_models/tello.yaml)."""
    path = Path(name_or_path)
    if path.is_file():
        return path
    candidate = data_path(*folder.split("/"), f"{name_or_path}{suffix}")
    if candidate.is_file():
        return candidate
    available = sorted(p.stem for p in data_path(*folder.split("/")).glob(f"*{suffix}"))
    raise FileNotFoundError(
        f"no file {str(name_or_path)!r} and no {folder} resource of that name; available: {available}"
    )
