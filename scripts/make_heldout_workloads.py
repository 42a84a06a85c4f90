"""Write the held-out workloads in the TimelyLLM artifact's JSON format:

- drone_burst: eight Tello drones; two bursts of normal tasks (survey, inspect, fetch a view)
  with urgent alerts (obstacle, person too close, lost target) arriving inside each burst;
- arm_heavy: four arms (two Indy7 with MiniSpec, two FLTRNN Python arms) with long
  pick-and-place plans, and urgent safety stops (a hand in the workspace);
- mixed_fleet: five drones and three arms with normal tasks arriving at random (Poisson, about
  one a second for 45 s) and urgent alerts at random in the same span on two drones and two
  arms of their own: a steady stream rather than bursts.

Each workload file is a list of jobs ("trigger time", agent, trace, task text, TUF); its trace
set (task_plan = a plan written by hand, for the `sim` engine) sits beside it. None is used
to tune any parameter: they are run once, after the policies are fixed.

    python scripts/make_heldout_workloads.py   # writes config/workloads/heldout/*.json
"""

from __future__ import annotations

import json
import random
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "config" / "workloads" / "heldout"
NORMAL_TUF = [1, 1, 1.5]
URGENT_TUF = [2, 0.2, 0.5]

DRONE_TRACES = [
    ("Scene: [door, window, plant, shelf]. Fly to the window and take a photo of the garden.",
     "g('window');tp();", False),
    ("Scene: [box, shelf, lamp]. Inspect the shelf from two sides: photograph it, circle it by a quarter "
     "turn, photograph it again.", "g('shelf');tp();tc(90);mf(60);tu(90);tp();", False),
    ("Scene: [table, chair, lamp]. Fly 120 cm forward, turn left by 90 degrees, fly 60 cm, then land back "
     "where you started.", "mf(120);tu(90);mf(60);tu(180);mf(60);tc(90);mf(120);", False),
    ("Scene: [car, tree, bench]. Look for a bicycle; if you find one, fly to it and photograph it.",
     "s('bicycle');?iv('bicycle')==True{g('bicycle');tp()};", False),
    ("Scene: [person, sofa, tv]. Count the people in the room: turn around in four steps and photograph "
     "each view.", "tp();tc(90);tp();tc(90);tp();tc(90);tp();tc(90);", False),
    ("Scene: [gate, fence, tree]. Check the gate: fly to it, climb 50 cm, photograph it, come back down.",
     "g('gate');mu(50);tp();md(50);", False),
    ("ALERT: obstacle 40 cm ahead during mf(150). Scene: [pillar, door]. Back off and go over it.",
     "mb(40);mu(80);mf(100);", True),
    ("ALERT: a person stepped under the drone. Scene: [person, table]. Climb away from the person.",
     "mu(60);mb(50);", True),
    ("ALERT: the target left the camera view. Scene: [car, tree, person]. Find the person again.",
     "s('person');g('person');", True),
]

ARM_TRACES = [
    ("Scene: [red cup, blue cup, tray, shelf]. Put both cups on the tray, the red one first.",
     "g('red cup');pk('red cup');g('tray');dr('tray');g('blue cup');pk('blue cup');g('tray');dr('tray');", False,
     "indy7"),
    ("Scene: [screw, bolt, nut, bin]. Sort the parts: put the screw, the bolt and the nut into the bin.",
     "g('screw');pk('screw');g('bin');dr('bin');g('bolt');pk('bolt');g('bin');dr('bin');g('nut');pk('nut');"
     "g('bin');dr('bin');", False, "indy7"),
    ("Scene: [box, lid, table]. Close the box: pick up the lid and drop it on the box.",
     "g('lid');pk('lid');g('box');dr('box');", False, "indy7"),
    ("Objects: ['apple', 'banana', 'plate', 'bowl']. Put the apple on the plate and the banana in the bowl.",
     "take('apple')\nmove_to(object_x('plate'), object_y('plate'))\ndrop('apple')\ntake('banana')\n"
     "move_to(object_x('bowl'), object_y('bowl'))\ndrop('banana')\n", False, "fltrnn_arm"),
    ("Objects: ['block1', 'block2', 'block3', 'table']. Stack the three blocks on the table, block1 at the "
     "bottom.", "take('block1')\nmove_to(object_x('table'), object_y('table'))\ndrop('block1')\ntake('block2')\n"
     "move_to(object_x('block1'), object_y('block1'))\ndrop('block2')\ntake('block3')\n"
     "move_to(object_x('block2'), object_y('block2'))\ndrop('block3')\n", False, "fltrnn_arm"),
    ("ALERT: a hand entered the workspace. Scene: [hand, tray]. Stop and move back to the safe pose.",
     "g('tray');l('stopped: hand in the workspace');", True, "indy7"),
    ("ALERT: the gripper dropped the cup. Objects: ['cup', 'table']. Pick the cup up again.",
     "take('cup')\nsay('cup recovered')\n", True, "fltrnn_arm"),
]


def _trace(trace_id: int, text: str, plan: str, urgent: bool, robot_type: str, robot_system: str) -> dict:
    return {"trace_id": trace_id, "robot_type": robot_type, "robot_system": robot_system, "task_input": text,
            "task_plan": plan, "task_tuf": URGENT_TUF if urgent else NORMAL_TUF}


def _job(job_id: int, t: float, agent: int, trace: dict) -> dict:
    return {"job_id": job_id, "trigger time": round(t, 3), "agent_id": agent, "robot_type": trace["robot_type"],
            "robot_system": trace["robot_system"], "trace_id": trace["trace_id"],
            "task_input": trace["task_input"], "tuf": trace["task_tuf"]}


def _drone_traces(first_id: int = 1) -> dict[str, dict]:
    return {str(i): _trace(i, text, plan, urgent, "drone", "typefly")
            for i, (text, plan, urgent) in enumerate(DRONE_TRACES, start=first_id)}


def _arm_traces(first_id: int = 1) -> dict[str, dict]:
    return {str(i): _trace(i, text, plan, urgent, "robot_arm", "indy7" if robot == "indy7" else "fltrnn")
            for i, (text, plan, urgent, robot) in enumerate(ARM_TRACES, start=first_id)}


def _pool(traces: dict[str, dict], system: str, tuf: list) -> list[dict]:
    """The traces of one robot system and one TUF (urgency level), in trace order."""
    return [tr for tr in traces.values() if tr["robot_system"] == system and tr["task_tuf"] == tuf]


def drone_burst(rng: random.Random) -> tuple[list[dict], dict]:
    traces = _drone_traces()
    normal = _pool(traces, "typefly", NORMAL_TUF)
    urgent = _pool(traces, "typefly", URGENT_TUF)
    jobs: list[dict] = []
    for burst_start in (0.0, 8.0):
        for agent in range(6):  # six drones get a normal task within a second
            jobs.append(_job(len(jobs), burst_start + rng.uniform(0, 1.0), agent, rng.choice(normal)))
        for agent in (6, 7):  # two alerts inside the burst, on drones of their own
            jobs.append(_job(len(jobs), burst_start + rng.uniform(0.5, 2.5), agent, rng.choice(urgent)))
    return sorted(jobs, key=lambda j: j["trigger time"]), traces


def arm_heavy(rng: random.Random) -> tuple[list[dict], dict]:
    traces = _arm_traces()
    jobs: list[dict] = []
    t = 0.0
    for _ in range(14):  # long plans, one every ~1 s, on four arms in turn
        agent = len(jobs) % 4
        kind = "indy7" if agent < 2 else "fltrnn"
        jobs.append(_job(len(jobs), t, agent, rng.choice(_pool(traces, kind, NORMAL_TUF))))
        t += rng.uniform(0.5, 1.5)
    for when in (2.0, 6.0, 10.0):  # safety alerts on arms of their own
        agent = 4 + len([j for j in jobs if j["agent_id"] >= 4]) % 2
        kind = "indy7" if agent == 4 else "fltrnn"
        jobs.append(_job(len(jobs), when + rng.uniform(0, 0.5), agent, rng.choice(_pool(traces, kind, URGENT_TUF))))
    return sorted(jobs, key=lambda j: j["trigger time"]), traces


def mixed_fleet(rng: random.Random) -> tuple[list[dict], dict]:
    traces = _drone_traces() | _arm_traces(first_id=len(DRONE_TRACES) + 1)
    # agents 0-4 drones, 5-6 Indy7 arms, 7 a FLTRNN arm; alerts: 8-9 drones, 10 Indy7, 11 FLTRNN
    systems = ["typefly"] * 5 + ["indy7"] * 2 + ["fltrnn"] + ["typefly"] * 2 + ["indy7", "fltrnn"]
    arrivals: list[tuple[float, int, list]] = []
    for agents, tuf, rate in ((range(8), NORMAL_TUF, 1.0), (range(8, 12), URGENT_TUF, 0.25)):
        t = rng.expovariate(rate)
        while t < 45.0:
            arrivals.append((t, rng.choice(list(agents)), tuf))
            t += rng.expovariate(rate)
    jobs = [_job(i, t, agent, rng.choice(_pool(traces, systems[agent], tuf)))
            for i, (t, agent, tuf) in enumerate(sorted(arrivals, key=lambda a: a[0]))]
    return jobs, traces


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    for name, make in (("drone_burst", drone_burst), ("arm_heavy", arm_heavy), ("mixed_fleet", mixed_fleet)):
        jobs, traces = make(random.Random(name))
        (OUT / f"{name}.json").write_text(json.dumps(jobs, indent=1) + "\n")
        (OUT / f"{name}-traces.json").write_text(json.dumps(traces, indent=1) + "\n")
        print(f"{OUT / name}.json: {len(jobs)} jobs, {len(traces)} traces")


if __name__ == "__main__":
    main()
