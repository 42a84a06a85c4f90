# Source this to use the built workspace: the venv's ROS 2 wheels as underlay, then install/.
# Keeps DDS discovery on this machine unless the caller chose otherwise.
_here="$(cd "$(dirname "${BASH_SOURCE[0]:-$0}")/.." && pwd)"
export VIRTUAL_ENV="$_here/.venv"
export PATH="$VIRTUAL_ENV/bin:$PATH"
export AMENT_PREFIX_PATH="$VIRTUAL_ENV${AMENT_PREFIX_PATH:+:$AMENT_PREFIX_PATH}"
export CMAKE_PREFIX_PATH="$VIRTUAL_ENV${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}"
export LLM_PLANNER_CACHE="${LLM_PLANNER_CACHE:-$_here/.cache}"
export ROS_AUTOMATIC_DISCOVERY_RANGE="${ROS_AUTOMATIC_DISCOVERY_RANGE:-LOCALHOST}"
export ROS_DOMAIN_ID="${ROS_DOMAIN_ID:-61}"
# vLLM CPU: one compute thread leaves the second core to ROS 2 and the robots.
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
if [ -f "$_here/install/setup.sh" ]; then
  COLCON_CURRENT_PREFIX="$_here/install" . "$_here/install/setup.sh"
fi
unset _here
