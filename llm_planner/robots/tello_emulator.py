"""A DJI Tello SDK 2.0 peer over UDP, for running the `tello` backend without a drone.

It answers the SDK's text commands on a loopback control port (`ok`, a value, or `error
...`), takes as long as the profiled Tello (exec_models/tello.yaml) to answer movement
commands, scaled by `time_scale`, and sends state packets to the client's port 8890 as the
real drone does. Every command is recorded, so tests can check what a plan made the drone do.
A fault drill: `fail_on` (a regex of SDK commands) makes matching flight commands stop half
way with the drone's error answer, as a real Tello does when an obstacle stops it.
"""

from __future__ import annotations

import argparse
import re
import socket
import threading
import time

STATE_PORT = 8890
_MOVES = {"forward", "back", "left", "right", "up", "down"}


class TelloEmulator:
    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        time_scale: float = 1.0,
        battery: int = 87,
        fail_on: str | None = None,
    ) -> None:
        self.time_scale = time_scale
        self.fail_on = re.compile(fail_on) if fail_on else None
        self.battery = battery
        self.flying = False
        self.commands: list[str] = []
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self._sock.bind((host, port))
        self._sock.settimeout(0.2)
        self.address = self._sock.getsockname()
        self._client: tuple[str, int] | None = None
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._serve, daemon=True, name="tello-emulator"),
            threading.Thread(target=self._send_state, daemon=True, name="tello-emulator-state"),
        ]

    @property
    def port(self) -> int:
        return self.address[1]

    def start(self) -> TelloEmulator:
        for t in self._threads:
            t.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(timeout=2)
        self._sock.close()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                data, sender = self._sock.recvfrom(1024)
            except (TimeoutError, OSError):
                continue
            self._client = sender
            command = data.decode("utf-8", "replace").strip()
            self.commands.append(command)
            reply = self.handle(command)
            if reply is not None:
                self._sock.sendto(reply.encode(), sender)

    def _wait(self, seconds: float) -> None:
        self._stop.wait(seconds * self.time_scale)

    def handle(self, command: str) -> str | None:
        """The SDK's answer to one command (None: no answer, as for `rc`)."""
        words = command.split()
        if not words:
            return "error"
        verb, args = words[0], words[1:]
        if verb in ("command", "streamon", "streamoff", "keepalive", "emergency", "motoron", "motoroff"):
            if verb == "emergency":
                self.flying = False
            return "ok"
        if verb == "rc":
            return None
        if verb.endswith("?"):
            return {"battery?": str(self.battery), "speed?": "10.0", "time?": "0s", "height?": "0dm"}.get(verb, "error")
        if verb == "takeoff":
            self._wait(2.0)
            self.flying = True
            return "ok"
        if verb == "land":
            self._wait(2.0)
            self.flying = False
            return "ok"
        if verb in _MOVES or verb in ("cw", "ccw"):
            if not self.flying:
                return "error Not joystick"
            try:
                value = int(args[0])
            except (IndexError, ValueError):
                return "error"
            low, high = (20, 500) if verb in _MOVES else (1, 360)
            if not low <= value <= high:
                return "error Out of range"
            if verb in ("up", "down"):
                seconds = 8e-7 * value**3 - 0.0003 * value**2 + 0.0388 * value + 1.3195
            elif verb in _MOVES:
                seconds = 0.0072 * value + 1.8144
            else:
                seconds = 0.0165 * value + 0.784
            if self.fail_on and self.fail_on.search(command):
                self._wait(seconds / 2)
                return "error Obstacle detected"
            self._wait(seconds)
            return "ok"
        if verb == "port":
            return "ok"
        return "error Unknown command"

    def _send_state(self) -> None:
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        sock.bind((self.address[0], 0))  # state must come from the drone's address
        try:
            while not self._stop.wait(0.1):
                if self._client is None:
                    continue
                h = 80 if self.flying else 0
                state = (
                    f"pitch:0;roll:0;yaw:0;vgx:0;vgy:0;vgz:0;templ:60;temph:63;tof:{h + 10};h:{h};"
                    f"bat:{self.battery};baro:0.00;time:0;agx:0.00;agy:0.00;agz:-1000.00;\r\n"
                )
                sock.sendto(state.encode(), (self._client[0], STATE_PORT))
        finally:
            sock.close()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="Emulate a DJI Tello's SDK on a loopback UDP port.")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=18889, help="control port (the real drone uses 8889)")
    p.add_argument("--time-scale", type=float, default=1.0, help="0.1 = ten times faster than the drone")
    p.add_argument(
        "--fail-on",
        metavar="REGEX",
        help="flight commands matching it stop half way with an error (e.g. '^forward': an obstacle ahead)",
    )
    args = p.parse_args(argv)
    emulator = TelloEmulator(args.host, args.port, args.time_scale, fail_on=args.fail_on).start()
    print(
        f"Tello emulator on {args.host}:{emulator.port}; point a tello robot at it with "
        f"options {{host: {args.host}, port: {emulator.port}}}. Ctrl-C to stop.",
        flush=True,
    )
    try:
        while True:
            time.sleep(1)
    except KeyboardInterrupt:
        emulator.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
