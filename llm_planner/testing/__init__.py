"""Helpers that the tests and the benchmarks share: engine drivers, the reference queue,
fleets of real ROS 2 nodes in one process. Not used by the planner itself."""
