"""The live view: a Foxglove WebSocket client watching a simulated run, and its MCAP."""

import json
import struct
import threading
import time

import jsonschema
import pytest
from mcap.reader import make_reader
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from llm_planner.lrtrace.composer import compose_preset, load_preset, mean_exec_times, preset_traces
from llm_planner.lrtrace.simulate import simulate
from llm_planner.view.channels import ACTIVITIES, SCHEMA_NAMES, SCHEMAS
from llm_planner.view.live_view import LiveView

MESSAGE_DATA = 0x01  # the Foxglove WebSocket protocol's binary opcode for a logged message


@pytest.fixture(scope="module")
def short_wid1(config):
    traces = preset_traces(load_preset("wid1"))
    workload = compose_preset(load_preset("wid1"), 0, traces, mean_exec_times(traces, config.robot_types))
    workload = workload.model_copy(update={"jobs": [j for j in workload.jobs if j.arrival_s < 30]})
    return workload, traces


class Subscriber:
    """Subscribes to every channel the server advertises and keeps what arrives, per topic."""

    def __init__(self, ws) -> None:
        self.ws = ws
        self.topics: dict[int, str] = {}
        while len(self.topics) < len(SCHEMAS):
            frame = json.loads(self.ws.recv(timeout=5))
            if frame["op"] == "advertise":
                self.topics.update({c["id"]: c["topic"] for c in frame["channels"]})
                self.schemas = {c["topic"]: json.loads(c["schema"]) for c in frame["channels"]}
                self.schema_names = {c["topic"]: c["schemaName"] for c in frame["channels"]}
        self.ws.send(json.dumps({"op": "subscribe", "subscriptions": [
            {"id": channel, "channelId": channel} for channel in self.topics]}))
        self.received: dict[str, list[dict]] = {topic: [] for topic in self.topics.values()}
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        try:
            for frame in self.ws:
                if isinstance(frame, bytes) and frame[0] == MESSAGE_DATA:
                    (subscription,) = struct.unpack_from("<I", frame, 1)
                    self.received[self.topics[subscription]].append(json.loads(frame[13:]))
        except ConnectionClosed:  # the connection closes with the server
            pass


def test_a_websocket_client_receives_every_channel_valid_against_its_schema(config, tokenizer, short_wid1):
    workload, traces = short_wid1
    view = LiveView(port=0)
    try:
        assert view.url.startswith("ws://127.0.0.1:")
        with connect(view.url, subprotocols=["foxglove.sdk.v1"]) as ws:
            client = Subscriber(ws)
            assert set(client.topics.values()) == set(SCHEMAS)
            assert client.schemas == SCHEMAS and client.schema_names == SCHEMA_NAMES
            time.sleep(0.2)  # the server has the subscription before the run begins
            result = simulate(workload, traces, "timely", config, 0, tokenizer, live_view=view)
            time.sleep(0.5)
    finally:
        view.close()
    client._reader.join(2)
    for topic, messages in client.received.items():
        assert messages, f"nothing arrived on {topic}"
        assert len(messages) == view.sent[topic]
        for message in messages:
            jsonschema.validate(message, SCHEMAS[topic])
    decisions = client.received["/llm_planner/view/decisions"]
    assert [d["task_id"] for d in decisions if d["kind"] == "ended"] == \
        [r.request.task_id for r in sorted(result.records, key=lambda r: r.finished_s)]
    stamp = decisions[0]["timestamp"]
    assert stamp["sec"] * 10**9 + stamp["nsec"] == int(decisions[0]["t_s"] * 1e9)
    last_utility = client.received["/llm_planner/view/utility"][-1]["levels"]
    assert last_utility["urgent"]["utility"] == pytest.approx(
        sum(r.utility for r in result.records if r.request.urgency_name == "urgent"), abs=1e-3)
    activities = {row["activity"] for m in client.received["/llm_planner/view/robots"] for row in m["rows"]}
    assert activities <= set(ACTIVITIES) and "executing" in activities
    assert max(m["size"] for m in client.received["/llm_planner/view/batch"]) == result.engine_stats.max_batch


def test_the_mcap_holds_the_same_channels_and_messages(config, tokenizer, short_wid1, tmp_path):
    workload, traces = short_wid1
    view = LiveView(mcap=tmp_path / "view.mcap")
    simulate(workload, traces, "timely", config, 0, tokenizer, live_view=view)
    view.close()
    counts: dict[str, int] = {}
    with open(tmp_path / "view.mcap", "rb") as f:
        for schema, channel, message in make_reader(f).iter_messages():
            assert json.loads(schema.data) == SCHEMAS[channel.topic] and schema.name == SCHEMA_NAMES[channel.topic]
            assert channel.message_encoding == "json"
            jsonschema.validate(json.loads(message.data), SCHEMAS[channel.topic])
            counts[channel.topic] = counts.get(channel.topic, 0) + 1
    assert counts == view.sent


def test_the_committed_layout_reads_only_channels_and_fields_the_view_sends():
    from pathlib import Path

    layout = json.loads((Path(__file__).resolve().parents[1] / "config/foxglove/llm_planner.json").read_text())
    paths = []
    for settings in layout["configById"].values():
        paths += [settings[key] for key in ("topicPath", "topicToRender") if key in settings]
        paths += [p["value"] for p in settings.get("paths", [])]
    assert len(paths) >= 12
    for path in paths:
        topic = next(t for t in SCHEMAS if path == t or path.startswith(t + "."))
        schema = SCHEMAS[topic]
        for field in path[len(topic) + 1:].split(".") if path != topic else []:
            name = field.split("[")[0]
            if "properties" in schema:
                assert name in schema["properties"], path
                schema = schema["properties"][name]
            else:  # a level's name under `levels`
                schema = schema["additionalProperties"]
            if schema.get("type") == "array":
                schema = schema["items"]


def test_a_taken_port_gives_a_free_one_and_the_server_listens_on_loopback_only():
    first = LiveView(port=0)
    try:
        second = LiveView(port=first.port)
        try:
            assert second.port not in (first.port, 0) and second.url == f"ws://127.0.0.1:{second.port}"
        finally:
            second.close()
    finally:
        first.close()
