"""The pipe between the planner and its robot links' process (ros/link_process.py Channel):
messages from several threads arrive whole and in each sender's order, one larger than the
socket's buffer waits for room instead of being cut, a closed end reads as EOF, and a closed
channel refuses to send (its file descriptor number may belong to another file by then)."""

import socket
import threading

import pytest
from ros_fixtures import rclpy  # noqa: F401 (skips this module without a ROS 2 workspace)

from llm_planner.ros.link_process import Channel

pytestmark = pytest.mark.ros


@pytest.fixture
def pair():
    mine, theirs = socket.socketpair()
    a, b = Channel(mine), Channel(theirs)
    yield a, b
    a.close()
    b.close()


def test_messages_from_several_threads_arrive_whole_and_in_order(pair):
    a, b = pair
    senders, each = 4, 500

    def send(sender: int) -> None:
        for i in range(each):
            a.send(("report", sender, i, "x" * (i % 300)))

    threads = [threading.Thread(target=send, args=(s,)) for s in range(senders)]
    for t in threads:
        t.start()
    seen: dict[int, list[int]] = {s: [] for s in range(senders)}
    for _ in range(senders * each):
        kind, sender, i, text = b.recv()
        assert kind == "report" and text == "x" * (i % 300)
        seen[sender].append(i)
    for t in threads:
        t.join()
    assert all(order == list(range(each)) for order in seen.values())
    assert not b.poll(0.0)


def test_a_message_larger_than_the_socket_buffer_waits_for_room(pair):
    a, b = pair
    big = ("dispatch", "x" * (4 * 1024 * 1024))  # several times what a socket pair buffers
    received = []
    reader = threading.Thread(target=lambda: received.append(b.recv()))
    reader.start()
    a.send(big)
    a.send(("after",))
    reader.join(timeout=30)
    assert received == [big]
    assert b.recv() == ("after",)


def test_a_closed_end_reads_as_end_of_file(pair):
    a, b = pair
    a.send(("last",))
    a.close()
    assert b.poll(1.0)
    assert b.recv() == ("last",)
    with pytest.raises(EOFError):
        b.recv()


def test_a_closed_channel_refuses_to_send(pair):
    a, _ = pair
    a.close()
    with pytest.raises(OSError, match="closed"):
        a.send(("too late",))
