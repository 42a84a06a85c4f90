"""ros2 launch llm_planner planner.launch.py [config:=...] [fleet:=...] [policy:=...] [params_file:=...]

Starts the planner node alone (robots run elsewhere); the node spec comes from
llm_planner.ros.fleet_main.node_specs, the last entry of a fleet launch."""

from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from llm_planner.ros.fleet_main import node_specs


def _planner(context, *args, **kwargs):
    def arg(name):
        return LaunchConfiguration(name).perform(context) or None

    spec = node_specs(arg("config"), arg("fleet"), arg("policy"), params_file=arg("params_file"))[-1]
    return [Node(package="llm_planner", executable=spec.executable, name=spec.name, arguments=spec.arguments,
                 output="screen")]


def generate_launch_description():
    return LaunchDescription([
        DeclareLaunchArgument("config", default_value=""),
        DeclareLaunchArgument("fleet", default_value=""),
        DeclareLaunchArgument("policy", default_value=""),
        DeclareLaunchArgument("params_file", default_value=""),
        OpaqueFunction(function=_planner),
    ])
