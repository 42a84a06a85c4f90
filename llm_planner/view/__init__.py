"""What a fleet operator watches: the planner state as Foxglove channels, live or in MCAP."""
