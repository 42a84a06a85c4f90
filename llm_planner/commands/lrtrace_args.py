"""The options of `lrtrace`'s commands that run workloads: `compare` and `simulate`
(`sim_options`), `replay` (`replay_options`), and the ones they share."""

from __future__ import annotations

import argparse

from llm_planner.catalog.faults import parse_fail_rates


def fail_rates(text: str) -> dict[str, float]:
    try:
        return parse_fail_rates(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def dtype_option(p) -> None:
    p.add_argument(
        "--dtype",
        choices=("float32", "bfloat16", "float16"),
        help="with --engine vllm: the engine's dtype (default: the config's, else bfloat16 on a CPU with "
        "native bf16). In bfloat16 a plan may change with the batch it is written in, so policies "
        "can end up executing different plans; float32 keeps them the same (docs/engine.md)",
    )


def sim_options(p) -> None:
    """What `compare` and `simulate` take."""
    p.add_argument("workload", help="workload file (LRTrace or TimelyLLM artifact JSON) or preset name")
    p.add_argument("--traces", help="trace set (LRTrace or TimelyLLM artifact JSON); presets bring theirs")
    p.add_argument("--max-batch", type=int, help="override batch.max_batch_size")
    p.add_argument("--json", help="write {policy: {level: metrics}} here")
    p.add_argument("--markdown", help="write the tables as Markdown here")
    p.add_argument("--plots", help="folder for plots (default out/<workload>)")
    p.add_argument("--no-plots", action="store_true")
    p.add_argument("--timeline-tasks", help="comma-separated task ids for the timeline plot")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument(
        "--engine",
        choices=("sim", "vllm"),
        help="sim: recorded plans, profiled timing; vllm: plans generated live by the model "
        "(default: the config's engine)",
    )
    p.add_argument("--model", help="with --engine vllm: a local Hugging Face model folder (default: config)")
    dtype_option(p)
    p.add_argument("--duration", type=float, help="only the jobs arriving in the first N seconds")
    p.add_argument(
        "--speed",
        type=float,
        default=1.0,
        help="arrivals N times as fast (the workload's trigger times divided by N)",
    )
    p.add_argument(
        "--levels",
        help="only the jobs of these urgency levels, comma-separated (urgent: what any "
        "policy can reach for the urgent tasks with nothing else competing)",
    )
    p.add_argument(
        "--fail-rate",
        type=fail_rates,
        metavar="RATES",
        help="robots fail calls on purpose: a probability per skill (mf=0.1,g=0.05) or one for "
        "every skill (0.05), drawn from the seed; the planner replans (config replan)",
    )
    p.add_argument(
        "--replicas",
        help="engine replicas; compare: counts to compare, e.g. 1,2,4 (default: "
        "config). Several replicas of the real engine run as Ray actors",
    )
    p.add_argument(
        "--ray",
        action="store_true",
        help="several sim replicas run as Ray actors too (default: in this process; the results are the same)",
    )
    p.add_argument(
        "--placement",
        help="which replica a generation joins, with more than one: round-robin, "
        "least-tokens or deadline; compare: several, comma-separated "
        "(default: config)",
    )
    p.add_argument(
        "--check-sim",
        action="store_true",
        help="with --engine vllm: re-simulate each run with the sim engine, the real engine's "
        "profile and the generated plans, and print the timing error",
    )
    p.add_argument(
        "--decisions",
        metavar="FILE",
        help="write every scheduling decision, with its reason, here (JSON lines; see lrtrace explain)",
    )
    p.add_argument(
        "--live-view",
        type=int,
        metavar="PORT",
        help="serve the runs' channels to Foxglove on 127.0.0.1:PORT (0: any free port)",
    )
    p.add_argument("--view-mcap", metavar="FILE", help="write the live view's channels to this MCAP file")
    p.add_argument(
        "--save-traces",
        metavar="FILE",
        help="with --engine vllm: write the generated plans as a trace set, for the sim engine to "
        "replay (--traces FILE with the same workload)",
    )


def replay_options(p) -> None:
    """What `replay` takes."""
    p.add_argument("workload", help="workload file or preset name")
    p.add_argument("--traces")
    p.add_argument(
        "--start-fleet",
        action="store_true",
        help="start the planner and simulated robots for the workload's agents in this process",
    )
    p.add_argument("--policy", help="planner policy (with --start-fleet)")
    p.add_argument("--policies", help="comma-separated: replay the workload once per policy (with --start-fleet)")
    p.add_argument("--engine", choices=("sim", "vllm"), help="planner engine (with --start-fleet; default: config)")
    p.add_argument("--model", help="with --engine vllm: a local Hugging Face model folder")
    dtype_option(p)
    p.add_argument("--max-batch", type=int)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--repeat",
        type=int,
        default=1,
        metavar="N",
        help="replay the workload N times per policy, each time starting one policy further on, and "
        "report the runs together with each policy's gap to timely (or the first policy), run by run "
        "(± its standard error): live figures move from run to run with the machine's speed",
    )
    p.add_argument("--speed", type=float, default=1.0, help="arrival-time speed-up (2 = twice as fast)")
    p.add_argument(
        "--pace-engine",
        metavar="PROFILE",
        help="the engine profile the workload was written for: arrivals are spread by how much "
        "slower this machine's engine is (never compressed)",
    )
    p.add_argument("--duration", type=float, help="replay only the jobs arriving in the first N seconds")
    p.add_argument(
        "--levels",
        help="replay only the jobs of these urgency levels, comma-separated, at the whole "
        "workload's pace (urgent: what any policy can reach for them alone)",
    )
    p.add_argument(
        "--grace",
        type=float,
        help="after the last arrival, seconds to wait without any status change before giving up "
        "on the tasks still open (default: 60 + 3x the engine time of the workload's plans on "
        "this machine's profile)",
    )
    p.add_argument(
        "--fail-rate",
        type=fail_rates,
        metavar="RATES",
        help="with --start-fleet: the simulated robots fail calls on purpose (see compare)",
    )
    p.add_argument(
        "--record",
        help="MCAP file (default out/<workload>-live.mcap); with --start-fleet it also holds the live view's channels",
    )
    p.add_argument(
        "--live-view",
        type=int,
        metavar="PORT",
        help="with --start-fleet: serve the live view to Foxglove on 127.0.0.1:PORT (0: any free port)",
    )
    p.add_argument("--compare-sim", action="store_true", help="also simulate the workload and print the differences")
    p.add_argument(
        "--idle-check",
        action="store_true",
        help="first run each urgent task of the workload alone on the idle planner, and print its "
        "first action under load against that",
    )
    p.add_argument("--json", help="write {policy: {level: metrics}} here (the keys of compare --json)")
    p.add_argument("--quiet", action="store_true")
