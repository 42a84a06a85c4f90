"""The planner's robot links in a process of their own (planner parameter
`robot_links: process`).

In the planner's process every ROS callback waits for the GIL while the planner thread
works through an engine step's tokens and its scheduling, a millisecond or more at a time
under load: a goal, its response, the robot's start report and the result each waited for
it there (docs/performance/ros-path.md). Here the links (`RobotLink`, one action client per robot) run
in a child process, which holds nothing else: the planner thread hands each goal over a pipe
and goes on, and the reports come back over the same pipe into the planner's inbox.

Planner side: `LinkProcessPort`, the core's RobotPort. Child: `python -m
llm_planner.ros.link_process FD`, started by the port; it reads its settings and then the
planner's commands from the pipe on file descriptor FD, and ends when the planner says stop
or its end of the pipe closes (the planner process died)."""

from __future__ import annotations

import ctypes
import logging
import os
import pickle
import select
import signal
import socket
import struct
import subprocess
import sys
import threading
import time

from llm_planner.dispatch.robot_port import RobotListener
from llm_planner.domain.clock import WallClock
from llm_planner.domain.tasks import DispatchedSegment
from llm_planner.ros.hops import HopLog
from llm_planner.ros.robot_client import TIMEOUT_CHECK_S, LiveRobotPort, RosRobotPort
from llm_planner.settings.fleet import FleetConfig

log = logging.getLogger(__name__)

START_S = 60.0  # for the child to import rclpy and make its nodes
_HEADER = struct.Struct("!I")
_LIBC = ctypes.PyDLL(None)  # a PyDLL call keeps the GIL: see Channel.send
_LIBC.write.argtypes = (ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t)
_LIBC.write.restype = ctypes.c_ssize_t


class Channel:
    """Pickled messages, each prefixed by its length, over one end of a socket pair; sent
    from any thread, received by one."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._fd = sock.fileno()
        os.set_blocking(self._fd, False)  # a write that holds the GIL must never wait
        self._lock = threading.Lock()

    def send(self, message) -> None:
        """Written by libc's write() holding the GIL. Python's own writes release it for the
        system call, and the planner thread then waited to win it back from the threads
        that took it meanwhile: 0.44 ms per write, twice as long between the engine's steps
        (docs/performance/ros-path.md). Writing a few hundred bytes into a socket with room is quick."""
        data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
        frame = _HEADER.pack(len(data)) + data
        with self._lock:
            if self._fd < 0:  # the number may belong to another file by now
                raise OSError("the channel is closed")
            sent = max(_LIBC.write(self._fd, frame, len(frame)), 0)  # -1: no room (EAGAIN) or closed
            while sent < len(frame):  # the other side is behind: wait for room, as any write would
                self._wait(select.POLLOUT)
                try:
                    sent += self._sock.send(frame[sent:])  # BrokenPipeError once the other end is gone
                except BlockingIOError:
                    continue

    def poll(self, timeout_s: float) -> bool:
        """Whether a message (or the end) is there to read within `timeout_s`."""
        return self._wait(select.POLLIN, timeout_s)

    def _wait(self, event: int, timeout_s: float | None = None) -> bool:
        poller = select.poll()  # not select(): file descriptors past 1023 are fine
        poller.register(self._fd, event)
        return bool(poller.poll(None if timeout_s is None else timeout_s * 1000))

    def recv(self):
        """The next message; EOFError once the other end has closed."""
        (size,) = _HEADER.unpack(self._read(_HEADER.size))
        return pickle.loads(self._read(size))

    def _read(self, size: int) -> bytes:
        data = bytearray()
        while len(data) < size:
            try:
                chunk = self._sock.recv(size - len(data))
            except BlockingIOError:
                self._wait(select.POLLIN)
                continue
            if not chunk:
                raise EOFError
            data += chunk
        return bytes(data)

    def close(self) -> None:
        with self._lock:
            self._fd = -1
            self._sock.close()


class LinkProcessPort(LiveRobotPort):
    """Planner → robots through the links process."""

    @property
    def link_nodes(self) -> list:
        """Nothing to spin in the planner's process: the links are the child's."""
        return []

    def __init__(
        self,
        fleet: FleetConfig,
        listener: RobotListener,
        driver_post,
        clock: WallClock,
        timeout_s: float,
        hops: HopLog | None = None,
        node_name: str = "llm_planner",
    ) -> None:
        super().__init__(fleet, listener, driver_post, clock, timeout_s, hops)
        mine, theirs = socket.socketpair()
        self._channel = Channel(mine)
        self._probes: dict[str, tuple[threading.Event, list[bool]]] = {}
        # Segments sent and not yet reported finished: failed with the reason if the links'
        # process ends under them (it keeps their timeouts).
        self._out: set[tuple[str, int]] = set()
        self._lock = threading.Lock()
        self._ended: str | None = None  # why the links' process is gone, once it is
        self._closing = False
        self._process = subprocess.Popen(
            [sys.executable, "-m", __name__, str(theirs.fileno())], pass_fds=(theirs.fileno(),)
        )
        theirs.close()
        self._channel.send(
            (
                "setup",
                {
                    "fleet": fleet.model_dump(),
                    "timeout_s": timeout_s,
                    "origin": clock.origin,
                    "hops_name": f"{node_name}_links",
                },
            )
        )
        if not self._channel.poll(START_S) or self._channel.recv() != ("ready",):
            self._process.kill()
            raise RuntimeError(f"the robot links' process did not start within {START_S:g} s")
        self._reader = threading.Thread(target=self._read, daemon=True, name="llm_planner-links-reader")
        self._reader.start()

    def _command(self, message: tuple) -> bool:
        """False if the links' process is gone."""
        if self._ended is None:
            try:
                self._channel.send(message)
                return True
            except OSError:  # it ended; the reader says why
                self._reader.join(timeout=5)
        return False

    def send(self, robot_id: str, task_id: str, segment: DispatchedSegment, worst_s: float) -> None:
        with self._lock:
            self._out.add((task_id, segment.index))
        if not self._command(("dispatch", robot_id, task_id, segment, worst_s)):
            self._fail_out()

    def cancel(self, robot_id: str, task_id: str) -> None:
        with self._lock:
            self._out = {key for key in self._out if key[0] != task_id}
        self._command(("cancel", robot_id, task_id))

    def probe(self, robot_id: str, timeout_s: float) -> bool:
        answered, answer = self._probes[robot_id] = (threading.Event(), [])
        if self._command(("probe", robot_id, timeout_s)) and answered.wait(timeout_s + 5.0):
            return answer[0]
        self._probes.pop(robot_id, None)
        return False

    def _read(self) -> None:
        while True:
            try:
                kind, *args = self._channel.recv()
            except (EOFError, OSError):
                break
            if kind == "started":
                self.segment_started(*args)
            elif kind == "finished":
                with self._lock:
                    self._out.discard((args[0], args[1]))
                self.segment_finished(*args)
            elif kind == "probed":
                robot_id, ok = args
                waiting = self._probes.pop(robot_id, None)  # None: an answer after its probe gave up
                if waiting is not None:
                    answered, answer = waiting
                    answer.append(ok)
                    answered.set()
        if not self._closing:
            try:
                code = self._process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                code = None
            self._ended = f"the robot links' process ended (exit status {code})"
            log.error("%s: segments out fail and no more can be sent", self._ended)
            self._fail_out()

    def _fail_out(self) -> None:
        """Every segment out fails: nobody watches them any more."""
        with self._lock:
            out, self._out = self._out, set()
        t = self.clock.now()
        for task_id, index in sorted(out):
            self.segment_finished(task_id, index, False, [], self._ended or "the robot links' process ended", t)

    def close(self) -> None:
        self._closing = True
        self._command(("stop",))
        try:
            self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            log.error("the robot links' process did not stop; killed")
            self._process.kill()
            self._process.wait()
        self._reader.join(timeout=5)
        self._channel.close()


class _ChildPort(RosRobotPort):
    """The links in the child: goals go out from the thread that reads the planner's commands
    (nothing here holds the GIL for long), reports go back over the pipe."""

    send_in_caller = True

    def __init__(self, fleet: FleetConfig, channel: Channel, clock: WallClock, timeout_s: float, hops: HopLog) -> None:
        self._channel = channel
        super().__init__(fleet, None, None, clock, timeout_s, hops)  # reports go over the pipe

    def report(self, message: tuple) -> None:
        self._channel.send(message)

    def segment_started(self, task_id: str, index: int, t: float) -> None:
        self.report(("started", task_id, index, t))

    def segment_finished(self, task_id: str, index: int, ok: bool, times: list[float], message: str, t: float) -> None:
        self.report(("finished", task_id, index, ok, times, message, t))

    def probe_and_report(self, robot_id: str, timeout_s: float) -> None:
        threading.Thread(
            target=lambda: self.report(("probed", robot_id, self.probe(robot_id, timeout_s))),
            daemon=True,
            name=f"probe-{robot_id}",
        ).start()


def serve(channel: Channel) -> None:
    import rclpy
    from rclpy.signals import SignalHandlerOptions

    from llm_planner.ros.spin import Spinning

    setup = channel.recv()[1]
    rclpy.init(signal_handler_options=SignalHandlerOptions.NO)
    hops = HopLog.from_env(setup["hops_name"])
    port = _ChildPort(
        FleetConfig.model_validate(setup["fleet"]), channel, WallClock(origin=setup["origin"]), setup["timeout_s"], hops
    )
    spinning = Spinning(port.link_nodes)
    channel.send(("ready",))
    next_check = time.monotonic() + TIMEOUT_CHECK_S
    try:
        while True:
            if channel.poll(max(0.0, next_check - time.monotonic())):
                try:
                    kind, *args = channel.recv()
                except EOFError:  # the planner's process is gone
                    return
                if kind == "stop":
                    return
                try:
                    if kind == "dispatch":
                        port.send(*args)
                    elif kind == "cancel":
                        port.cancel(*args)
                    elif kind == "probe":
                        port.probe_and_report(*args)
                except Exception:  # one failed command must not stop every link (its segment times out)
                    log.exception("robot links: %s failed", kind)
            if time.monotonic() >= next_check:
                port.check_timeouts()
                next_check = time.monotonic() + TIMEOUT_CHECK_S
    finally:
        spinning.shutdown()  # destroys the link nodes
        hops.write()
        rclpy.try_shutdown()


if __name__ == "__main__":
    # The planner's process stops this one, or its end of the pipe closes; Ctrl-C on a launch
    # and a service manager's SIGTERM reach the whole process group, and the links must go
    # on until the planner has stopped using them.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    serve(Channel(socket.socket(fileno=int(sys.argv[1]))))
