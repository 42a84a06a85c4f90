"""ROS 2 adapters (rclpy): the planner node, robot action servers, the fleet launcher.
Only this subpackage imports rclpy and the generated llm_planner_interfaces types."""

from llm_planner.ros.rclpy_compat import check_rclpy_version

check_rclpy_version()
