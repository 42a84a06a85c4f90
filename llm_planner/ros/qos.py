"""QoS shared by the planner and the robots.

ROS 2's defaults keep only the last 10 service responses and feedback messages per reader:
when the planner's action clients fall behind during a burst, older goal responses are
overwritten and lost. Deeper reliable queues on both sides keep every one."""

from typing import TypedDict

from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy, qos_profile_services_default

DEEP = 1000

SERVICE = QoSProfile(
    depth=DEEP,
    history=HistoryPolicy.KEEP_LAST,
    reliability=ReliabilityPolicy.RELIABLE,
    durability=qos_profile_services_default.durability,
)
FEEDBACK = QoSProfile(depth=DEEP, history=HistoryPolicy.KEEP_LAST, reliability=ReliabilityPolicy.RELIABLE)
# Tasks and statuses: deep enough for a burst of hundreds of tasks and their status changes.
TOPIC = QoSProfile(depth=5000, history=HistoryPolicy.KEEP_LAST, reliability=ReliabilityPolicy.RELIABLE)


class ActionClientQos(TypedDict):
    """ActionClient's QoS keyword arguments."""

    goal_service_qos_profile: QoSProfile
    result_service_qos_profile: QoSProfile
    cancel_service_qos_profile: QoSProfile
    feedback_sub_qos_profile: QoSProfile


class ActionServerQos(TypedDict):
    """ActionServer's QoS keyword arguments."""

    goal_service_qos_profile: QoSProfile
    result_service_qos_profile: QoSProfile
    cancel_service_qos_profile: QoSProfile
    feedback_pub_qos_profile: QoSProfile


ACTION_CLIENT = ActionClientQos(
    goal_service_qos_profile=SERVICE,
    result_service_qos_profile=SERVICE,
    cancel_service_qos_profile=SERVICE,
    feedback_sub_qos_profile=FEEDBACK,
)
ACTION_SERVER = ActionServerQos(
    goal_service_qos_profile=SERVICE,
    result_service_qos_profile=SERVICE,
    cancel_service_qos_profile=SERVICE,
    feedback_pub_qos_profile=FEEDBACK,
)
