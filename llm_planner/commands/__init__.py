"""The command lines `llm-planner` and `lrtrace` (the top layer: they may use every other)."""
