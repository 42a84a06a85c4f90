"""Configuration: planner parameters, the fleet file, where data and caches live."""
