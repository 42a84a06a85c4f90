#!/bin/bash
# docs/ros/control.md: a cancel, an urgency change, a gate that stops a call and a denied approval,
# with llm-planner-ctl on config/fleet_gated.yaml (sim engine, simulated robots, ROS_DOMAIN_ID 88).
# Usage: scripts/ctl_demo.sh (about a minute; the fleet's log goes to out/ctl-fleet.log)
mkdir -p out
. scripts/env.sh
export ROS_DOMAIN_ID=88
SORT='Scene: [apple, banana, red bowl, yellow bowl]. Put the apple into the red bowl and the banana into the yellow bowl.'
FIND='Scene: [desk, laptop, bottle, chair]. Find the bottle, fly to it and take a photo of it.'
CLIMB='Scene: [window, sofa, person]. Climb 80 cm, fly 100 cm forward, then come back to where you started.'
llm-planner-fleet --fleet config/fleet_gated.yaml > out/ctl-fleet.log 2>&1 &
FLEET=$!
sleep 10
show() { printf '$'; for a in "$@"; do case "$a" in *" "*) printf ' "%s"' "$a";; *) printf ' %s' "$a";; esac; done; echo; }
run() { show "$@"; "$@"; echo "(exit $?)"; echo; }
background() { show "$@" "&"; "$@" > "out/ctl-$3.txt" 2>&1 & BG=$!; }
background llm-planner-ctl submit arm1 "$SORT" --task-id sort
sleep 3
run llm-planner-ctl list
run llm-planner-ctl urgency sort urgent
run llm-planner-ctl list
run llm-planner-ctl cancel sort --reason "operator: wrong table"
wait $BG; echo "(the submit's output)"; cat out/ctl-arm1.txt; echo
run llm-planner-ctl submit drone2 "$CLIMB" --task-id climb2
background llm-planner-ctl submit drone2 "$FIND" --task-id photo
sleep 4
run llm-planner-ctl list
run llm-planner-ctl deny photo --reason "people below"
wait $BG; echo "(the submit's output)"; cat out/ctl-drone2.txt; echo
run llm-planner-ctl lifecycle get
kill -INT $FLEET; wait $FLEET
