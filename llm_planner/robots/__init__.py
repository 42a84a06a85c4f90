"""Robot backends behind the action servers: simulated skills, the Tello SDK backend and its emulator."""
