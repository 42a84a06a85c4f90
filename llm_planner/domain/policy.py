"""The scheduling policies by name: the one list every layer validates against (their
behaviour lives in llm_planner.sched.policies)."""

from enum import StrEnum


class PolicyName(StrEnum):
    TIMELY = "timely"  # segmented, suspending, PUD priority, hold/stream dispatch, batch shrinking (this project)
    TIMELYLLM_PAPER = "timelyllm-paper"  # segmented, suspending, PUD priority, as the TimelyLLM paper
    FCFS = "fcfs"  # segmented, suspending, first come first served
    EDF = "edf"  # segmented, suspending, earliest first deadline
    VLLM = "vllm"  # baseline: whole plan generated (FCFS continuous batching), then executed
    VLLM_STREAM = "vllm-stream"  # baseline: each skill sent when generated, never paused
    RTLM = "rtlm"  # baseline: whole plans, RT-LM's uncertainty-aware priority, consolidation and offload
