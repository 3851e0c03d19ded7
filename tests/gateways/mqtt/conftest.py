import pytest

from .mosquitto import Mosquitto


@pytest.fixture(scope="session")
def mosquitto(tmp_path_factory):
    broker = Mosquitto(tmp_path_factory.mktemp("mosquitto"))
    yield broker
    broker.stop()
