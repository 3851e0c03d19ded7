"""The brokers of the behaviour tests: Debian's mosquitto as the reference, FerryMQ's MQTT gateway under test."""

import pytest

from .mosquitto import Mosquitto


@pytest.fixture(scope="session")
def mosquitto(tmp_path_factory):
    broker = Mosquitto(tmp_path_factory.mktemp("mosquitto"))
    yield broker
    broker.stop()


@pytest.fixture(scope="module")
def ferrymq_mqtt(tmp_path_factory):
    from ferrymq.testing.server import FerryMQServer

    with FerryMQServer(tmp_path_factory.mktemp("mqtt"), {"enablePropertyFilter": True, "autoCreateTopicEnable": True},
                       mqtt=True) as server:
        yield server


@pytest.fixture(scope="module")
def brokers(mosquitto, ferrymq_mqtt):
    """(name, port) of the reference broker, then FerryMQ's MQTT gateway."""
    return [("mosquitto", mosquitto.port), ("ferrymq", ferrymq_mqtt.mqtt_port)]
