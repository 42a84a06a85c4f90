"""The shared vocabulary: tasks and their states, time-utility functions, clocks."""
