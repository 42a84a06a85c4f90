"""ROS 2 adapters (rclpy): the planner node, robot action servers, the fleet launcher.
Only this subpackage imports rclpy and the generated llm_planner_interfaces types."""
