"""ros2 launch llm_planner fleet.launch.py [config:=...] [fleet:=...] [policy:=...] [params_file:=...]
    [robots_per_process:=1]

Starts the robot action servers of the fleet file (one per process by default) and the
planner node, as separate processes. Which nodes and arguments is decided by llm_planner.ros.fleet_main.node_specs
(tested Python); this file only wraps it. Without `ros2 launch`, `llm-planner-fleet` starts
the same set in one process."""

from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from llm_planner.ros.fleet_main import node_specs


def _nodes(context, *args, **kwargs):
    def arg(name):
        return LaunchConfiguration(name).perform(context) or None

    return [Node(package="llm_planner", executable=spec.executable, name=spec.name, arguments=spec.arguments,
                 output="screen")
            for spec in node_specs(arg("config"), arg("fleet"), arg("policy"), int(arg("robots_per_process") or 1),
                                   arg("params_file"))]


def generate_launch_description():
    return LaunchDescription([
        DeclareLaunchArgument("config", default_value="", description="planner config (default: packaged)"),
        DeclareLaunchArgument("fleet", default_value="", description="fleet file (default: packaged)"),
        DeclareLaunchArgument("policy", default_value="", description="override the config's policy"),
        DeclareLaunchArgument("params_file", default_value="",
                              description="the planner node's ROS 2 parameters (e.g. config/planner_params.yaml)"),
        DeclareLaunchArgument("robots_per_process", default_value="1",
                              description="robot servers per process (over 31 robots on one host with "
                                          "ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST: 2 or more)"),
        OpaqueFunction(function=_nodes),
    ])
