#!/bin/bash
# How busy the machine's cores are, every 2 s, from /proc/stat (all cores together; idle and
# iowait count as not busy). Run it beside a benchmark: scripts/investigations/cpu_busy.sh > F & ...; kill %1
prev=($(head -1 /proc/stat))
while sleep 2; do
  cur=($(head -1 /proc/stat))
  idle=$(( (${cur[4]}+${cur[5]}) - (${prev[4]}+${prev[5]}) ))
  tot=0; for i in 1 2 3 4 5 6 7 8; do tot=$(( tot + ${cur[$i]} - ${prev[$i]} )); done
  echo "$(date +%T) busy $(( 100*(tot-idle)/tot ))%"
  prev=("${cur[@]}")
done
