"""End-to-end over real rclpy/Fast DDS: planner node + 2 drones + 1 arm action servers
(sim backends at 20x speed), tasks published on /llm_planner/tasks."""

import math
import threading
import time

import pytest
from ros_fixtures import TRACES, instruction, start_fleet, wait_until

from llm_planner.settings.fleet import RobotConfig

pytestmark = pytest.mark.ros

FAST = {"time_scale": 0.05}
FLAKY_SEED, FLAKY_RATES = 5, "mf=0.5"


@pytest.fixture(scope="module", params=["threads", "process"], ids=["links-in-threads", "links-process"])
def fleet(request):
    robots = [
        RobotConfig(id="drone1", type="tello", options=dict(FAST, seed=1)),
        RobotConfig(id="drone2", type="tello", options=dict(FAST, seed=2)),
        RobotConfig(id="arm1", type="indy7", options=dict(FAST, seed=3)),
        # fault drills: a robot whose climbs fail, one that never finishes a descent
        RobotConfig(id="faulty", type="tello", options=dict(FAST, fail_on=r"^mu\(")),
        RobotConfig(id="flaky", type="tello", options=dict(FAST, seed=FLAKY_SEED, fail_rate=FLAKY_RATES)),
        RobotConfig(id="stuck", type="tello", options=dict(FAST, stall_on=r"^md\(")),
        RobotConfig(id="leaving", type="tello", options={"time_scale": 1.0}),
    ]
    running = start_fleet(robots, robot_timeout_s=2.0, result_kept_s=1.0, engine_step_timeout_s=3.0,
                          robot_links=request.param)
    yield running
    running.stop()


def links_here(fleet) -> dict:
    """The planner's robot links, for the tests that reach into them (robot_links: threads)."""
    links = getattr(fleet.fleet.planner_node.port, "links", None)
    if links is None:
        pytest.skip("the robot links run in a process of their own")
    return links


def states(client, task_id):
    return [m.state for _, m in client.statuses[task_id]]


def test_tasks_succeed_with_segments_in_order(fleet):
    c = fleet.client
    jobs = {"ok-d1": ("drone1", 1), "ok-d2": ("drone2", 2), "ok-arm": ("arm1", 10), "ok-d1b": ("drone1", 3)}
    for task_id, (robot, trace) in jobs.items():
        c.publish(task_id, robot, instruction(trace))
    assert c.wait_terminal(jobs, timeout=60)
    for task_id, (_, trace) in jobs.items():
        final = c.terminal(task_id)
        assert final.state == final.SUCCEEDED, (task_id, final.message)
        assert states(c, task_id)[0] == final.QUEUED
        sent = c.segments_executing(task_id)
        assert sent == list(range(len(sent))) and len(sent) >= 2
        texts = [m.segment_text for _, m in c.statuses[task_id] if m.state == m.EXECUTING]
        assert "".join(texts).strip(";") in TRACES[trace].plan
        assert math.isfinite(final.response_time_s) and final.utility > 0 and final.waiting_time_s >= 0
    # each robot executed each task's segments in order, one task after the other
    for server in fleet.fleet.robots:
        seen = {}
        for task_id, index in server.executed:
            assert index == seen.get(task_id, -1) + 1
            seen[task_id] = index
    drone1 = [t for t, _ in fleet.fleet.robot("drone1").executed]
    assert drone1 == sorted(drone1, key=lambda t: drone1.index(t))  # tasks not interleaved
    # segments that waited at a robot started straight from the previous one of their plan
    assert sum(server.handovers for server in fleet.fleet.robots) > 0


@pytest.mark.parametrize("fields,reason", [
    (dict(robot_id="nobody"), "unknown robot_id"),
    (dict(instruction=""), "empty instruction"),
    (dict(instruction="x" * (64 * 1024 + 1)), "longer than"),
    (dict(urgency=7), "out of range"),
    (dict(beta=1.0, ert_s=1.0, cutoff_s=0.5), "must be greater than ert_s"),
    (dict(beta=1.0, ert_s=float("nan"), cutoff_s=2.0), "non-finite"),
    (dict(beta=float("inf")), "non-finite"),
    (dict(instruction="Scene: [moon]. Fly to the moon."), "no recorded plan"),
])
def test_bad_input_is_rejected_and_the_node_keeps_serving(fleet, fields, reason):
    c = fleet.client
    task_id = f"bad-{reason.split()[0]}-{len(c.statuses)}"
    args = dict(robot_id="drone2", instruction=instruction(8), urgency=0)
    args.update(fields)
    c.publish(task_id, **args)
    assert c.wait_terminal([task_id], timeout=10)
    final = c.terminal(task_id)
    assert final.state == final.REJECTED and reason in final.message
    good = f"after-{task_id}"
    c.publish(good, "drone2", instruction(8))
    assert c.wait_terminal([good], timeout=30) and c.terminal(good).state == c.terminal(good).SUCCEEDED


def test_duplicate_task_id_is_rejected(fleet):
    c = fleet.client
    c.publish("dup", "drone1", instruction(7), urgency=1)
    c.publish("dup", "drone1", instruction(7), urgency=1)

    def finals():
        return sorted((m.state, m.message) for _, m in c.statuses["dup"] if m.state in (m.SUCCEEDED, m.REJECTED))

    assert wait_until(lambda: len(finals()) == 2, timeout=30)
    (succeeded, _), (rejected, message) = finals()
    assert (succeeded, rejected) == (4, 6) and message == "duplicate task_id 'dup'"


def test_robot_reporting_a_failed_call_fails_the_task_and_its_follow_up_too(fleet):
    c = fleet.client
    c.publish("fail-call", "faulty", instruction(3))  # mu(80);mf(100);mb(100);md(80);
    assert c.wait_terminal(["fail-call"], timeout=30)
    final = c.terminal("fail-call")
    assert final.state == final.FAILED and "simulated failure of mu(80)" in final.message
    assert final.message.endswith("; replanned as task fail-call-replan1")
    # the follow-up retries from mu(80), which this robot always fails: attempts exhausted
    assert c.wait_terminal(["fail-call-replan1"], timeout=30)
    follow = c.terminal("fail-call-replan1")
    assert follow.state == follow.FAILED and follow.robot_id == "faulty"
    assert follow.message.endswith("not replanned: 1 of 1 follow-ups made (replan.max_attempts)")


def test_a_call_failed_at_random_is_replanned_and_the_follow_up_succeeds(fleet):
    """The robot fails calls with a probability drawn from its seed (catalog/faults.py), so
    the test knows which task ids fail once and then succeed."""
    from llm_planner.catalog.faults import CallFaults, parse_fail_rates
    from llm_planner.catalog.skills import load_skill_set
    from llm_planner.domain.names import follow_up_task_id

    calls = load_skill_set("minispec_drone").find_calls(TRACES[3].plan)
    faults = CallFaults(parse_fail_rates(FLAKY_RATES), FLAKY_SEED)

    def first_failure(task_id, todo):
        return next((i for i, call in enumerate(todo) if faults.fails(task_id, call)), None)

    def fails_once(task_id):
        failed = first_failure(task_id, calls)
        return failed is not None and first_failure(follow_up_task_id(task_id, 1), calls[failed:]) is None

    task_id = next(f"flaky-{n}" for n in range(100) if fails_once(f"flaky-{n}"))
    c = fleet.client
    c.publish(task_id, "flaky", instruction(3))
    follow_id = follow_up_task_id(task_id, 1)
    assert c.wait_terminal([task_id], timeout=30)
    assert c.terminal(task_id).message.endswith(f"; replanned as task {follow_id}")
    assert c.wait_terminal([follow_id], timeout=30)
    follow = c.terminal(follow_id)
    assert follow.state == follow.SUCCEEDED, follow.message
    assert c.segments_executing(follow_id)  # dispatched to the robot


def test_robot_that_never_answers_fails_the_task_after_the_timeout(fleet):
    c = fleet.client
    c.publish("stall", "stuck", instruction(3))
    c.publish("other", "drone2", instruction(1))
    assert c.wait_terminal(["stall", "other"], timeout=40)
    stall = c.terminal("stall")
    assert stall.state == stall.FAILED and "gave no result for segment 3" in stall.message, stall.message
    assert c.terminal("other").state == stall.SUCCEEDED


def test_robot_that_disappears_fails_the_task(fleet):
    c = fleet.client
    c.publish("gone", "leaving", instruction(2))  # seven real-time segments, ~8 s
    assert wait_until(lambda: c.segments_executing("gone"), timeout=20)
    fleet.fleet.remove_robot("leaving")
    assert c.wait_terminal(["gone"], timeout=30)
    final = c.terminal("gone")
    assert final.state == final.FAILED and "leaving" in final.message
    c.publish("gone-already", "leaving", instruction(5))  # still in the fleet file, no server
    assert c.wait_terminal(["gone-already"], timeout=30)
    final = c.terminal("gone-already")
    assert final.state == final.FAILED and "no action server /leaving/execute_segment" in final.message
    c.publish("still-ok", "drone1", instruction(5))
    assert c.wait_terminal(["still-ok"], timeout=30) and c.terminal("still-ok").state == final.SUCCEEDED


def test_goal_cancel_stops_the_call_and_is_reported(fleet):
    from action_msgs.msg import GoalStatus
    from rclpy.action import ActionClient

    from llm_planner_interfaces.action import ExecuteSegment

    node = fleet.client
    client = ActionClient(node, ExecuteSegment, "/drone2/execute_segment")
    try:
        assert client.wait_for_server(timeout_sec=10)
        goal = ExecuteSegment.Goal(task_id="cancel-me", segment_index=0, text="d(200);", calls=["d(200)"], last=True)
        sent = client.send_goal_async(goal)
        assert wait_until(sent.done, 10) and sent.result().accepted
        handle = sent.result()
        time.sleep(0.3)
        # The robot's goal keeps the UUID it was sent, printed as hex by rclpy's debug messages
        # (numpy's array printing cost ~50 µs a message).
        robot = next(r for r in fleet.fleet.robots if r.robot.id == "drone2")
        assert wait_until(lambda: robot._running is not None, 10)
        running = robot._running
        assert bytes(running.goal_handle.goal_id.uuid) == bytes(handle.goal_id.uuid)
        assert f"{running.goal_handle.goal_id.uuid}" == bytes(handle.goal_id.uuid).hex()
        canceling = handle.cancel_goal_async()
        assert wait_until(canceling.done, 10)
        result = handle.get_result_async()
        assert wait_until(result.done, 10)
        assert result.result().status == GoalStatus.STATUS_CANCELED  # not SUCCEEDED: d(200) did not run out
        assert result.result().result.message == "canceled during d(200)"
    finally:
        client.destroy()


def test_empty_task_id_gets_one_assigned(fleet):
    c = fleet.client
    before = {t for t in c.statuses if t.startswith("auto-")}
    c.publish("", "drone1", instruction(8))

    def assigned():
        return [t for t in c.statuses if t.startswith("auto-") and t not in before]

    assert wait_until(lambda: assigned() and c.terminal(assigned()[0]) is not None, timeout=30)
    final = c.terminal(assigned()[0])
    assert final.state == final.SUCCEEDED and final.robot_id == "drone1"


def test_robot_server_executes_the_goals_calls_not_its_text(fleet):
    """The planner parsed the segment and sends its calls; the server runs those (feedback
    names each), and a call that is not one of the robot's skills fails the goal with why."""
    from rclpy.action import ActionClient

    from llm_planner_interfaces.action import ExecuteSegment

    client = ActionClient(fleet.client, ExecuteSegment, "/drone1/execute_segment")

    def run(task_id, text, calls):
        feedback = []
        sent = client.send_goal_async(
            ExecuteSegment.Goal(task_id=task_id, segment_index=0, text=text, calls=calls, last=True),
            feedback_callback=lambda msg: feedback.append(msg.feedback.call))
        assert wait_until(sent.done, 10) and sent.result().accepted
        result = sent.result().get_result_async()
        assert wait_until(result.done, 20)
        return result.result().result, feedback

    try:
        assert client.wait_for_server(timeout_sec=10)
        result, feedback = run("calls-1", "mf(50);", ["tc(30)", "tp()"])
        assert result.success and len(result.call_times_s) == 2
        assert wait_until(lambda: len(feedback) == 2, 5) and feedback == ["tc(30)", "tp()"]  # a topic: may lag
        result, _ = run("calls-2", "tp;", ["zz(1)"])
        assert not result.success and "is not a call of a minispec_drone skill" in result.message
        result, feedback = run("calls-3", "tc(30);tp;", [])  # a client that sends only the text
        assert result.success and wait_until(lambda: len(feedback) == 2, 5) and feedback == ["tc(30)", "tp"]
    finally:
        client.destroy()


def test_a_plans_next_waiting_segment_follows_without_a_gap(fleet):
    """Two segments of one plan sent at once: the robot goes from the first's last call to the
    second's first, and that last call's time runs to the second's start (as it would inside
    one goal), so the robot's own work between them (here a parse made slow on purpose) is not
    counted as waiting for the planner."""
    from rclpy.action import ActionClient

    from llm_planner_interfaces.action import ExecuteSegment

    client = ActionClient(fleet.client, ExecuteSegment, "/drone2/execute_segment")
    server = fleet.fleet.robot("drone2")
    parse, begin = server._calls, server._begin
    first_call_starts: list[float] = []  # the robot's own clock, as it times calls

    def slow_parse(goal):
        time.sleep(0.05)
        return parse(goal)

    def recording_begin(job, first_call_s):
        if job.task_id == "gapless":
            first_call_starts.append(first_call_s)
        return begin(job, first_call_s)

    def send(index, calls, last):
        sent = client.send_goal_async(ExecuteSegment.Goal(task_id="gapless", segment_index=index, text=";".join(calls),
                                                          calls=calls, last=last))
        assert wait_until(sent.done, 10) and sent.result().accepted
        return sent.result().get_result_async()

    server._calls, server._begin = slow_parse, recording_begin
    try:
        assert client.wait_for_server(timeout_sec=10)
        first = send(0, ["tc(30)", "tc(30)"], last=False)
        second = send(1, ["tc(30)"], last=True)
        assert wait_until(lambda: first.done() and second.done(), 20)
        a, b = first.result().result, second.result().result
        assert a.success and b.success and len(a.call_times_s) == 2 and len(first_call_starts) == 2
        # the first segment's calls cover the robot's time up to the second's first call, exactly
        assert sum(a.call_times_s) == pytest.approx(first_call_starts[1] - first_call_starts[0], rel=1e-9)
        assert a.call_times_s[-1] >= 0.05  # the slow parse of the next segment counts to the last call
    finally:
        del server._calls, server._begin
        client.destroy()


def test_an_empty_last_segment_ends_the_plan_and_the_robot_goes_on_at_once(fleet):
    """A plan whose end came after its last segment was sent ends with an empty last segment:
    the robot accepts it, and its next task starts without the hold for the ended plan's next
    segment."""
    from rclpy.action import ActionClient

    from llm_planner.dispatch.robot_queue import TASK_HOLD_S
    from llm_planner_interfaces.action import ExecuteSegment

    client = ActionClient(fleet.client, ExecuteSegment, "/drone2/execute_segment")

    def send(task_id, index, calls, last):
        sent = client.send_goal_async(ExecuteSegment.Goal(task_id=task_id, segment_index=index, text=";".join(calls),
                                                          calls=calls, last=last))
        assert wait_until(sent.done, 10) and sent.result().accepted
        return sent.result().get_result_async()

    try:
        assert client.wait_for_server(timeout_sec=10)
        segment = send("ends-late", 0, ["tc(30)"], last=False)
        end = send("ends-late", 1, [], last=True)
        assert wait_until(lambda: segment.done() and end.done(), 10)
        assert segment.result().result.success and end.result().result.success
        started = time.monotonic()
        following = send("after-it", 0, ["tc(30)"], last=True)
        assert wait_until(following.done, TASK_HOLD_S / 2) and following.result().result.success
        assert time.monotonic() - started < TASK_HOLD_S / 2
    finally:
        client.destroy()


def _losing_results(fleet, robot_id: str, task_id: str, lost) -> None:
    """Make `robot_id`'s link lose the result answers of `task_id` that `lost(entry, asked_s)`
    picks, as a lost service response would (the others go through)."""
    link = links_here(fleet)[robot_id]
    ask = type(link)._request_result

    def request_result(entry):
        if entry.task_id != task_id or not lost(entry, time.monotonic()):
            ask(link, entry)

    link._request_result = request_result


def test_a_link_keeps_no_futures_of_goals_that_have_ended(fleet):
    """rclpy 9.1's send_goal_async leaves a future behind for every goal (ros2/rclpy#1532), and
    its executor walks all of a client's futures whenever the client has data: a link then
    grew and slowed with every goal it had sent."""
    c = fleet.client
    client = links_here(fleet)["drone1"].client
    ids = [f"no-leak-{i}" for i in range(4)]
    for task_id in ids:
        c.publish(task_id, "drone1", instruction(1))
    assert c.wait_terminal(ids, timeout=30)
    assert all(c.terminal(t).state == c.terminal(t).SUCCEEDED for t in ids)
    assert wait_until(lambda: not client._futures, 5), f"{len(client._futures)} futures left"


def test_an_ended_goal_leaves_the_status_list_but_its_result_is_still_answered(fleet):
    """Each goal status message lists every goal the server still has, and clients pay per entry:
    an ended goal leaves the list after GOAL_LISTED_S, but the robot answers for its result
    for the fleet's result_kept_s (a late or repeated request gets the same result)."""
    from action_msgs.msg import GoalStatus, GoalStatusArray
    from rclpy.action import ActionClient
    from rclpy.qos import qos_profile_action_status_default

    from llm_planner.ros.robot_server import GOAL_LISTED_S
    from llm_planner_interfaces.action import ExecuteSegment

    node = fleet.client
    kept_s = fleet.fleet.robot("drone2").result_kept_s
    assert kept_s > 5 * GOAL_LISTED_S
    client = ActionClient(node, ExecuteSegment, "/drone2/execute_segment")
    listed: list[set[bytes]] = []

    def on_status(msg) -> None:
        listed.append({bytes(s.goal_info.goal_id.uuid) for s in msg.status_list})

    status = node.create_subscription(GoalStatusArray, "/drone2/execute_segment/_action/status", on_status,
                                      qos_profile_action_status_default)
    try:
        assert client.wait_for_server(timeout_sec=10)
        sent = client.send_goal_async(ExecuteSegment.Goal(task_id="late-ask", segment_index=0, text="tc(30);",
                                                          calls=["tc(30)"], last=True))
        assert wait_until(sent.done, 10) and sent.result().accepted
        handle = sent.result()
        goal_id = bytes(handle.goal_id.uuid)
        first = handle.get_result_async()
        assert wait_until(first.done, 10) and first.result().status == GoalStatus.STATUS_SUCCEEDED
        assert wait_until(lambda: any(goal_id in ids for ids in listed), 5)  # it was listed
        time.sleep(3 * GOAL_LISTED_S)
        # the next status message (sent on the next goal's state change) no longer lists it
        other = client.send_goal_async(ExecuteSegment.Goal(task_id="late-ask-2", segment_index=0, text="tc(30);",
                                                           calls=["tc(30)"], last=True))
        assert wait_until(other.done, 10) and other.result().accepted
        other_id = bytes(other.result().goal_id.uuid)
        assert wait_until(lambda: other_id in listed[-1], 5)
        assert goal_id not in listed[-1]
        late = handle.get_result_async()  # asked again after it left the list
        assert wait_until(late.done, 10)
        assert late.result().status == GoalStatus.STATUS_SUCCEEDED
        assert late.result().result.success
        assert list(late.result().result.call_times_s) == list(first.result().result.call_times_s)
    finally:
        node.destroy_subscription(status)
        client.destroy()


def test_a_lost_result_is_asked_for_again_while_the_robot_keeps_it(fleet):
    c = fleet.client
    asked: set[int] = set()

    def first_ask_of_each_segment(entry, _):
        lost = entry.index not in asked
        asked.add(entry.index)
        return lost

    _losing_results(fleet, "drone2", "lost-once", first_ask_of_each_segment)
    try:
        c.publish("lost-once", "drone2", instruction(1))
        assert c.wait_terminal(["lost-once"], timeout=30)
        final = c.terminal("lost-once")
        assert final.state == final.SUCCEEDED, final.message
        assert len(asked) >= 2  # every segment's first answer was lost
    finally:
        del links_here(fleet)["drone2"]._request_result


def test_a_result_the_robot_no_longer_keeps_fails_the_task_with_why(fleet):
    c = fleet.client
    kept_s = fleet.fleet.planner_node.port.result_kept_s
    assert fleet.fleet.robot("drone2").result_kept_s == kept_s  # both sides read the fleet file's
    first_ask: dict[int, float] = {}

    def until_long_after_the_end(entry, now):  # the segment itself ends within ~0.2 s
        return now - first_ask.setdefault(entry.index, now) < 1.5 * kept_s

    _losing_results(fleet, "drone2", "lost-for-good", until_long_after_the_end)
    try:
        c.publish("lost-for-good", "drone2", instruction(3))
        assert c.wait_terminal(["lost-for-good"], timeout=30)
        final = c.terminal("lost-for-good")
        assert final.state == final.FAILED and "its result was lost and the robot no longer has it" in final.message, \
            final.message
    finally:
        del links_here(fleet)["drone2"]._request_result


def test_an_engine_that_stops_answering_is_replaced_and_its_task_goes_on(fleet):
    """The planner node's engine hangs inside a step; after the time limit the engine is
    replaced, the task that was inside is told why and goes on in the new engine, and the
    node plans the next task."""
    c = fleet.client
    node = fleet.fleet.planner_node
    hung = node.planner.engine.inner
    never = threading.Event()
    step = hung.step

    def hanging_step():
        never.wait()
        return step()

    node.driver.call(lambda: setattr(hung, "step", hanging_step))
    try:
        c.publish("hang", "drone1", instruction(1))
        assert c.wait_terminal(["hang"], timeout=30)
        final = c.terminal("hang")
        assert final.state == final.SUCCEEDED, final.message
        why = [m.message for _, m in c.statuses["hang"] if "step did not return within 3 s" in m.message]
        assert len(why) == 1 and "the engine was restarted; the plan goes on" in why[0], why
        c.publish("after-hang", "drone1", instruction(5))
        assert c.wait_terminal(["after-hang"], timeout=30)
        assert c.terminal("after-hang").state == final.SUCCEEDED, c.terminal("after-hang").message
        assert node.planner.engine.inner is not hung
    finally:
        never.set()


def test_a_failing_callback_does_not_stop_its_nodes_executor(fleet):
    """The executor raises a callback's exception out of spin_once (as rclpy's do); the node's
    loop logs it and goes on, so one bad callback does not leave a robot or a link deaf for good."""
    import rclpy

    from llm_planner.ros.spin import spin_node

    node = rclpy.create_node("failing_callback_probe", start_parameter_services=False, enable_rosout=False)
    calls = []

    def fails_once() -> None:
        calls.append(time.monotonic())
        if len(calls) == 1:
            raise RuntimeError("a callback failed on purpose")

    guard = node.create_guard_condition(fails_once)
    spinning = spin_node(node)
    try:
        guard.trigger()
        assert wait_until(lambda: len(calls) == 1, 5)
        guard.trigger()
        assert wait_until(lambda: len(calls) == 2, 5)
    finally:
        spinning.shutdown()
