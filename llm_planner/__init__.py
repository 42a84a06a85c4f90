"""llm_planner: a time-utility LLM planner for robot fleets (core has no ROS imports)."""

__version__ = "0.1.0"
