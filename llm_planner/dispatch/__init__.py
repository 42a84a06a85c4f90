"""What is sent to a robot and when: the robot port protocol and the simulated robots."""
