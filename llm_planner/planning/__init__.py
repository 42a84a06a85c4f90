"""The planner loop: task intake, generation state, the segmenter, the live driver thread."""
