"""The plan length predictor: how long a plan and its segments will be, before and during
generation (features of the task text, a small learned model, online refinement). No ROS."""
