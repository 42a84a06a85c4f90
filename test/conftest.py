import importlib.abc
import os
import sys

import pytest

# Tests never leave the machine (ROS 2 fixtures, later, rely on the same variables).
os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
os.environ.setdefault("ROS_DOMAIN_ID", "61")

# `make test-fast` runs the core alone: ROS 2, vLLM and Ray cannot be imported there, so the modules
# that need them skip at collection, and a test that reaches either without its `ros` or `vllm`
# marker fails with this error instead of quietly slowing the inner loop down.
HEAVY = ("rclpy", "llm_planner_interfaces", "vllm", "ray")


class _CoreOnly(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in HEAVY:
            raise ModuleNotFoundError(f"{name} is not imported in the core-only run (LLM_PLANNER_CORE_ONLY): "
                                      f"mark the test `ros`, `vllm` or `ray`", name=name)
        return None


if os.environ.get("LLM_PLANNER_CORE_ONLY"):
    sys.meta_path.insert(0, _CoreOnly())


@pytest.fixture(scope="session")
def config():
    from llm_planner.settings.config import load_planner_config

    return load_planner_config()


@pytest.fixture(scope="session")
def tokenizer():
    from llm_planner.catalog.tokenizer import load_tokenizer

    return load_tokenizer()


@pytest.fixture(scope="session")
def drone():
    from llm_planner.catalog.skills import load_skill_set

    return load_skill_set("minispec_drone")


@pytest.fixture(scope="session")
def python_arm():
    from llm_planner.catalog.skills import load_skill_set

    return load_skill_set("python_arm")


def pytest_configure(config):
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent))
