"""Helpers that the tests, the benchmarks (benchmarks/) and the studies (scripts/investigations/)
share: engine drivers, the reference queue, fleets of real ROS 2 nodes in one process, the
benchmarks' result schema, the tuning loss's reference. Shipped on purpose: the benchmarks run
against an installed package and import them. The planner never does (.importlinter: the top
layer, which nothing imports)."""
