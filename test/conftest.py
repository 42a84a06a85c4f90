import os

import pytest

# Tests never leave the machine (ROS 2 fixtures, later, rely on the same variables).
os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
os.environ.setdefault("ROS_DOMAIN_ID", "61")


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
