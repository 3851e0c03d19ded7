"""The MQTT listener as the server commands start it: mqttListenPort, and its refusal when taken."""

from __future__ import annotations

import re
import socket
import subprocess
import sys

from ferrymq.server import config as cfg


def test_the_mqtt_port_is_1883_by_default_and_0_turns_it_off():
    assert cfg.GatewayConfig().mqttListenPort == 1883
    assert cfg.from_properties(cfg.GatewayConfig, {"mqttListenPort": "0"}).mqttListenPort == 0


def test_a_taken_mqtt_port_stops_the_server_naming_the_key(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        conf = tmp_path / "standalone.conf"
        conf.write_text(f"listenPort=0\nnamesrvListenPort=0\nbindAddress=127.0.0.1\nhttpListenPort=0\n"
                        f"mqttListenPort={port}\nstorePathRootDir={tmp_path / 'store'}\n"
                        f"kvConfigPath={tmp_path / 'kv.json'}\n")
        result = subprocess.run([sys.executable, "-m", "ferrymq.server.cli", "standalone", "-c", str(conf)],
                                capture_output=True, text=True, timeout=60)
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    assert re.search(rf"mqttListenPort {port} is in use .*set mqttListenPort in the config file", result.stderr)


def test_the_gateway_command_serves_devices_in_front_of_any_cluster(tmp_path):
    from ferrymq.testing.ports import free_port
    from ferrymq.testing.server import MQTT_UP, FerryMQServer
    from tests.broker.test_cli_broker import start, stop

    from .devices import V5, Device

    with FerryMQServer(tmp_path / "server") as server:  # its own gateways are off
        server.create_topic("ViaMqttCommand", 2)
        port = free_port()
        conf = tmp_path / "gateway.conf"
        conf.write_text(f"bindAddress=127.0.0.1\nmqttListenPort={port}\nstorePathRootDir={tmp_path / 'gateway'}\n")
        proc, (bound,), _ = start(["gateway", "mqtt", "-n", server.namesrv_addr, "--log-level", "INFO", "-c",
                                   str(conf)], MQTT_UP)
        try:
            assert bound == port, "".join(proc.log)
            subscriber, publisher = Device(port, V5, "via-command", clean=False), Device(port, V5)
            subscriber.subscribe("ViaMqttCommand/#", qos=2)
            publisher.publish("ViaMqttCommand/x", b"through the command", 2)
            (msg,) = subscriber.receive(1)
            assert (msg.topic, msg.payload, msg.qos) == ("ViaMqttCommand/x", b"through the command", 2)
            subscriber.close()
            publisher.publish("ViaMqttCommand/y", b"while away", 1)
            publisher.close()
        finally:
            rest = stop(proc)
        assert "stopped" in rest
        # the session persists on the gateway's side, under its storePathRootDir
        proc, _, _ = start(["gateway", "mqtt", "-n", server.namesrv_addr, "--log-level", "INFO", "-c", str(conf)],
                           MQTT_UP)
        try:
            subscriber = Device(port, V5, "via-command", clean=False)
            assert subscriber.session_present
            assert [m.payload for m in subscriber.receive(1)] == [b"while away"]
            subscriber.close()
        finally:
            stop(proc)


def test_the_broker_processs_gateway_stores_and_delivers_in_process(tmp_path):
    """Its sends run through the broker's request table, not a loopback connection: the stored BORNHOST
    has port 0, where a connection would show its own port. Its subscribers are served from the broker's
    store: the broker hands out by pulls only the reader's message (msgGetTotalTodayNow), none to the gateway."""
    import io
    import threading

    from ferrymq.sdk.admin_cli import main as admin_main
    from ferrymq.sdk.blocking_clients import BlockingPushConsumer
    from ferrymq.sdk.client_config import ClientConfig
    from ferrymq.testing.server import FerryMQServer

    from .devices import V311, Device

    with FerryMQServer(tmp_path / "server", mqtt=True) as server:
        server.create_topic("InProcess", 1)
        got, arrived = [], threading.Event()

        def listener(msgs, context):
            got.extend(msgs)
            arrived.set()

        consumer = BlockingPushConsumer("InProcessReader", config=ClientConfig(server.namesrv_addr),
                                        consume_from_where="CONSUME_FROM_FIRST_OFFSET")
        consumer.subscribe("InProcess", "*")
        consumer.register_listener(listener)
        consumer.start()
        subscriber = Device(server.mqtt_port, V311)
        subscriber.subscribe("InProcess/#", qos=1)
        device = Device(server.mqtt_port, V311)
        try:
            device.publish("InProcess/dev1", b"stored in process", 1)
            assert arrived.wait(20)
            assert [(m.topic, m.payload) for m in subscriber.receive(1)] == [("InProcess/dev1", b"stored in process")]
            out, err = io.StringIO(), io.StringIO()
            assert admin_main(["brokerStatus", "-n", server.namesrv_addr, "-b", server.broker_addr], out, err) == 0
            status = dict(line.replace(" ", "").split(":", 1) for line in out.getvalue().splitlines())
            assert status["msgGetTotalTodayNow"] == "1"
        finally:
            device.close()
            subscriber.close()
            consumer.shutdown()
    assert [(m.body, m.born_host[1]) for m in got] == [(b"stored in process", 0)]


def test_the_broker_processs_gateway_also_delivers_from_the_clusters_other_brokers(tmp_path):
    """The store it reads holds its own broker's queues only: those of another broker of the cluster are
    pulled, so its devices get what is stored there too."""
    import time

    from ferrymq.sdk.blocking_clients import BlockingProducer
    from ferrymq.sdk.client_config import ClientConfig
    from ferrymq.sdk.message import Message
    from ferrymq.testing import admin
    from ferrymq.testing.ports import free_port
    from ferrymq.testing.server import FerryMQServer
    from ferrymq.wire.bodies import MessageQueue

    from .devices import V311, Device

    with FerryMQServer(tmp_path / "a", mqtt=True) as a:
        b_namesrv = free_port()
        b_conf = {"brokerName": "broker-b", "namesrvListenPort": b_namesrv,
                  "namesrvAddr": f"{a.namesrv_addr};127.0.0.1:{b_namesrv}"}
        with FerryMQServer(tmp_path / "b", b_conf) as b:
            a.create_topic("TwoBrokers", 1)
            b.create_topic("TwoBrokers", 1)
            deadline = time.monotonic() + 10
            while {q.broker_name for q in admin.route(a.namesrv_addr, "TwoBrokers").queue_datas} != {"broker-a", "broker-b"}:
                assert time.monotonic() < deadline, "broker-b's queue is not routed by a's name server"
                time.sleep(0.05)
            device = Device(a.mqtt_port, V311)
            device.subscribe("TwoBrokers/#", qos=1)
            producer = BlockingProducer("TwoBrokersProducer", config=ClientConfig(a.namesrv_addr))
            producer.start()
            try:
                for broker in ("broker-a", "broker-b"):
                    producer.send_to_queue(Message("TwoBrokers", f"on {broker}".encode(), tags=broker),
                                           MessageQueue("TwoBrokers", broker, 0))
                got = {(m.topic, m.payload) for m in device.receive(2)}
                assert got == {("TwoBrokers/broker-a", b"on broker-a"), ("TwoBrokers/broker-b", b"on broker-b")}
            finally:
                producer.shutdown()
                device.close()
