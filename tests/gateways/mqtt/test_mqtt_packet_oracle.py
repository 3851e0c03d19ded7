"""The codec checked against an independent one: the npm package ``mqtt-packet`` (9.x), run through node.

Both directions, for generated packets of both protocol levels: our bytes parsed by mqtt-packet give the
same fields, and the bytes mqtt-packet generates from those fields decode to the same packet. The package
is installed on first use into ``.cache/`` beside this file (git-ignored); each hypothesis example sends
one batch to a single node process, since starting node costs far more than coding a packet.
"""

from __future__ import annotations

import dataclasses
import fcntl
import json
import shutil
import subprocess
from pathlib import Path

import pytest
from ferrymq.gateways.mqtt.packet import MQTT_5
from ferrymq.gateways.mqtt.packets import (
    Auth,
    ConnAck,
    Connect,
    Disconnect,
    PingReq,
    PingResp,
    PubAck,
    PubComp,
    Publish,
    PubRec,
    PubRel,
    SubAck,
    Subscribe,
    Subscription,
    UnsubAck,
    Unsubscribe,
    Will,
    decode_packet,
    encode,
)
from ferrymq.gateways.mqtt.properties import PROPERTIES, Properties, PropertyType
from hypothesis import Phase, given, settings
from hypothesis import strategies as st

from .strategies import VERSIONS, packets

HERE = Path(__file__).resolve().parent
CACHE = HERE / ".cache" / "mqtt-packet"
SCRIPT = HERE / "mqtt_packet_oracle.js"
PACKAGE = "mqtt-packet@9"

_MISSING = [tool for tool in ("node", "npm") if shutil.which(tool) is None]
if _MISSING:
    pytest.skip(f"{' and '.join(_MISSING)} not on PATH: the mqtt-packet oracle cannot run", allow_module_level=True)


@pytest.fixture(scope="module")
def oracle():
    """A function running one batch through mqtt-packet, installing the package on first use."""
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (CACHE / "node_modules" / "mqtt-packet" / "package.json").exists():
            subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--prefix", str(CACHE), PACKAGE],
                           check=True, capture_output=True, timeout=300)

    def run(generate: list[dict], parse: list[dict]) -> dict:
        result = subprocess.run(["node", str(SCRIPT)], input=json.dumps({"generate": generate, "parse": parse}),
                                capture_output=True, text=True, check=True, timeout=60,
                                env={"NODE_PATH": str(CACHE / "node_modules"), "PATH": _path()})
        return json.loads(result.stdout)

    return run


def _path() -> str:
    return str(Path(shutil.which("node")).parent)


# --- Our packets as mqtt-packet's objects, and back ------------------------------------------------------

def _js_name(name: str) -> str:
    special = {"user_property": "userProperties", "maximum_qos": "maximumQoS",
               "subscription_identifier_available": "subscriptionIdentifiersAvailable"}
    if name in special:
        return special[name]
    first, *rest = name.split("_")
    return first + "".join(word.capitalize() for word in rest)


JS_NAMES = {spec.name: _js_name(spec.name) for spec in PROPERTIES}
SPECS_BY_JS_NAME = {_js_name(spec.name): spec for spec in PROPERTIES}


def _hex(data: bytes) -> dict:
    return {"hex": data.hex()}


def _props_to_js(props: Properties, into: dict) -> dict:
    out = {}
    for spec in PROPERTIES:
        value = getattr(props, spec.name)
        if value is None or value == ():
            continue
        if spec.name == "user_property":
            pairs: dict = {}
            for key, one in value:
                pairs.setdefault(key, []).append(one)
            value = {key: values[0] if len(values) == 1 else values for key, values in pairs.items()}
        elif spec.name == "subscription_identifier":
            value = value[0] if len(value) == 1 else list(value)
        elif spec.type is PropertyType.BYTE and spec.name != "maximum_qos":
            value = bool(value)  # mqtt-packet's "byte" properties are booleans
        elif spec.type is PropertyType.BINARY_DATA:
            value = _hex(value)
        out[JS_NAMES[spec.name]] = value
    if out:
        into["properties"] = out
    return into


def _props_from_js(obj: dict | None) -> Properties:
    fields: dict = {}
    for js_name, value in (obj or {}).items():
        spec = SPECS_BY_JS_NAME[js_name]
        if spec.name == "user_property":
            value = tuple((key, one) for key, values in value.items()
                          for one in (values if isinstance(values, list) else [values]))
        elif spec.name == "subscription_identifier":
            value = tuple(value) if isinstance(value, list) else (value,)
        elif isinstance(value, bool):
            value = int(value)
        elif isinstance(value, dict):
            value = bytes.fromhex(value["hex"])
        fields[spec.name] = value
    return Properties(**fields)


def _buffer(obj) -> bytes:
    return bytes.fromhex(obj["hex"])


def to_js(packet, version: int) -> dict:
    cmd = packet.TYPE.name.lower()
    if isinstance(packet, Connect):
        out = {"cmd": cmd, "protocolId": packet.protocol_name, "protocolVersion": packet.protocol_level,
               "clean": packet.clean_start, "clientId": packet.client_identifier, "keepalive": packet.keep_alive}
        if packet.user_name is not None:
            out["username"] = packet.user_name
        if packet.password is not None:
            out["password"] = _hex(packet.password)
        if packet.will is not None:
            will = packet.will
            out["will"] = _props_to_js(will.properties, {"topic": will.topic, "payload": _hex(will.payload),
                                                         "qos": will.qos, "retain": will.retain})
        return _props_to_js(packet.properties, out)
    if isinstance(packet, ConnAck):
        code = "reasonCode" if version == MQTT_5 else "returnCode"
        return _props_to_js(packet.properties, {"cmd": cmd, "sessionPresent": packet.session_present,
                                                code: packet.reason_code})
    if isinstance(packet, Publish):
        out = {"cmd": cmd, "topic": packet.topic_name, "payload": _hex(packet.payload), "qos": packet.qos,
               "retain": packet.retain, "dup": packet.dup}
        if packet.packet_identifier is not None:
            out["messageId"] = packet.packet_identifier
        return _props_to_js(packet.properties, out)
    if isinstance(packet, (PubAck, PubRec, PubRel, PubComp)):
        return _props_to_js(packet.properties, {"cmd": cmd, "messageId": packet.packet_identifier,
                                                "reasonCode": packet.reason_code})
    if isinstance(packet, Subscribe):
        return _props_to_js(packet.properties, {"cmd": cmd, "messageId": packet.packet_identifier, "subscriptions": [
            {"topic": s.topic_filter, "qos": s.qos, "nl": s.no_local, "rap": s.retain_as_published,
             "rh": s.retain_handling} for s in packet.subscriptions]})
    if isinstance(packet, (SubAck, UnsubAck)):
        return _props_to_js(packet.properties, {"cmd": cmd, "messageId": packet.packet_identifier,
                                                "granted": list(packet.reason_codes)})
    if isinstance(packet, Unsubscribe):
        return _props_to_js(packet.properties, {"cmd": cmd, "messageId": packet.packet_identifier,
                                                "unsubscriptions": list(packet.topic_filters)})
    if isinstance(packet, (Disconnect, Auth)):
        return _props_to_js(packet.properties, {"cmd": cmd, "reasonCode": packet.reason_code})
    return {"cmd": cmd}


def from_js(obj: dict, version: int):
    """The packet an mqtt-packet object describes."""
    cmd, props = obj["cmd"], _props_from_js(obj.get("properties"))
    if cmd == "connect":
        will = obj.get("will")
        if will is not None:
            will = Will(will["topic"], _buffer(will["payload"]), will["qos"], will["retain"],
                        _props_from_js(will.get("properties")))
        password = obj.get("password")
        return Connect(obj["clientId"], obj["protocolVersion"], obj["clean"], obj["keepalive"], will,
                       obj.get("username"), None if password is None else _buffer(password), props,
                       obj["protocolId"])
    if cmd == "connack":
        code = obj["reasonCode"] if version == MQTT_5 else obj["returnCode"]
        return ConnAck(obj["sessionPresent"], code, props)
    if cmd == "publish":
        return Publish(obj["topic"], _buffer(obj["payload"]), obj["qos"], obj["retain"], obj["dup"],
                       obj.get("messageId"), props)
    acks = {"puback": PubAck, "pubrec": PubRec, "pubrel": PubRel, "pubcomp": PubComp}
    if cmd in acks:
        return acks[cmd](obj["messageId"], obj.get("reasonCode", 0), props)
    if cmd == "subscribe":
        return Subscribe(obj["messageId"], tuple(
            Subscription(s["topic"], s["qos"], bool(s.get("nl", False)), bool(s.get("rap", False)), s.get("rh", 0))
            for s in obj["subscriptions"]), props)
    if cmd == "suback":
        return SubAck(obj["messageId"], tuple(obj["granted"]), props)
    if cmd == "unsubscribe":
        return Unsubscribe(obj["messageId"], tuple(obj["unsubscriptions"]), props)
    if cmd == "unsuback":
        return UnsubAck(obj["messageId"], tuple(obj.get("granted", ())), props)
    if cmd in ("disconnect", "auth"):
        cls = Disconnect if cmd == "disconnect" else Auth
        return cls(obj.get("reasonCode", 0), props)
    return {"pingreq": PingReq, "pingresp": PingResp}[cmd]()


def _normal(props: Properties) -> Properties:
    """mqtt-packet keeps user properties in an object keyed by name: only the order per name survives."""
    return dataclasses.replace(props, user_property=tuple(sorted(props.user_property, key=lambda p: p[0])))


def normalized(packet):
    if isinstance(packet, Connect) and packet.will is not None:
        packet = dataclasses.replace(packet, will=dataclasses.replace(
            packet.will, properties=_normal(packet.will.properties)))
    if hasattr(packet, "properties"):
        packet = dataclasses.replace(packet, properties=_normal(packet.properties))
    return packet


def mqtt_packet_expresses(packet) -> bool:
    """Packets mqtt-packet 9 cannot write although the spec allows them (its limits, not ours)."""
    if isinstance(packet, Connect):
        if packet.password is not None and packet.user_name is None:
            return False  # "Username is required to use password", in MQTT 5 too
        if not packet.client_identifier and not packet.clean_start:
            return False  # "clientId must be given if cleanSession set to 0", in MQTT 5 too
    for props in (getattr(packet, "properties", None), getattr(getattr(packet, "will", None), "properties", None)):
        if props is not None:
            names = [name for name, value in props.user_property]
            if any(value == "" for name, value in props.user_property if names.count(name) > 1):
                return False  # a repeated name whose first value is "" loses that value when parsed
    return True


def mqtt_packet_parses(packet) -> bool:
    """mqtt-packet 9's parser requires AUTH's reason code, which the spec lets a *Success* without
    properties leave out (3.15.2.1) and which we then leave out."""
    return not (isinstance(packet, Auth) and packet.reason_code == 0 and packet.properties == Properties())


@pytest.mark.parametrize("version", VERSIONS)
# No shrinking: a failure names its packet, and each shrinking step would start node again.
@settings(max_examples=5, deadline=None, phases=(Phase.explicit, Phase.generate))
@given(data=st.data())
def test_mqtt_packet_parses_our_bytes_and_we_decode_its_bytes(oracle, version, data):
    batch = [p for p in data.draw(st.lists(packets(version), min_size=60, max_size=60)) if mqtt_packet_expresses(p)]
    answer = oracle(
        generate=[{"version": version, "packet": to_js(packet, version)} for packet in batch],
        parse=[{"version": version, "hex": encode(packet, version).hex()} for packet in batch],
    )
    for packet, generated, parsed in zip(batch, answer["generated"], answer["parsed"], strict=True):
        expected = normalized(packet)
        if mqtt_packet_parses(packet):
            assert not isinstance(parsed, dict), f"mqtt-packet refused our {encode(packet, version).hex()}: {parsed}"
            assert len(parsed) == 1
            assert normalized(from_js(parsed[0], version)) == expected
        assert isinstance(generated, str), f"mqtt-packet could not generate {packet}: {generated}"
        assert normalized(decode_packet(bytes.fromhex(generated), version)) == expected


def test_mqtt_packet_reads_the_short_forms_it_supports(oracle):
    """The spec's shortest encodings of a successful acknowledgement and a normal DISCONNECT."""
    short = [(PubAck(1), "40020001"), (PubRel(1), "62020001"), (Disconnect(), "e000")]
    answer = oracle(generate=[], parse=[{"version": MQTT_5, "hex": encode(p, MQTT_5).hex()} for p, _ in short])
    for (packet, wire), parsed in zip(short, answer["parsed"], strict=True):
        assert encode(packet, MQTT_5).hex() == wire
        assert from_js(parsed[0], MQTT_5) == packet
