"""A config value FerryMQ cannot honour stops the start with one line naming the file, key, value and what
is allowed; misspelled and Apache 4.x keys are pointed out; ``--help`` and ``-p`` list every key."""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import socket
import subprocess
from pathlib import Path

import pytest

from ferrymq.server import cli
from ferrymq.server import config as cfg
from ferrymq.server.store.config import MessageStoreConfig

from .cli_process import run_cli

ROOT = Path(__file__).resolve().parents[1]


def run(*args: str) -> subprocess.CompletedProcess:
    return run_cli(*args, cwd=ROOT, timeout=30)


@contextlib.contextmanager
def taken_port():
    """A loopback port some other socket is listening on, for as long as the block runs."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        yield taken.getsockname()[1]


def write_conf(tmp_path: Path, text: str) -> Path:
    """``text`` after keys that keep a start inside tmp_path and on free loopback ports."""
    conf = tmp_path / "test.conf"
    conf.write_text(
        f"storePathRootDir={tmp_path / 'store'}\nkvConfigPath={tmp_path / 'kv.json'}\n"
        f"configStorePath={tmp_path / 'ns.properties'}\nbindAddress=127.0.0.1\nnamesrvListenPort=0\n{text}\n"
    )
    return conf


def the_error_line(result: subprocess.CompletedProcess) -> str:
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


BAD_VALUES = [
    ("flushDiskType=FOO", "expected one of ASYNC_FLUSH, SYNC_FLUSH"),
    ("flushDiskType=sync_flush", "expected one of ASYNC_FLUSH, SYNC_FLUSH"),
    ("brokerRole=MASTER", "expected one of ASYNC_MASTER, SYNC_MASTER, SLAVE"),
    ("brokerRole=SLAVE", "a slave's brokerId must be > 0 (brokerId=0)"),
    ("brokerId=-1", "expected 0 (master) or a slave id > 0"),
    ("haMasterAddress=master", "expected 'host:port' addresses"),
    ("brokerIP2=master.example", "expected an IPv4 or IPv6 address"),
    ("listenPort=99999", "expected a port number 0-65535"),
    ("listenPort=-1", "expected a port number 0-65535"),
    ("haListenPort=65536", "expected a port number 0-65535"),
    ("namesrvListenPort=70000", "expected a port number 0-65535"),
    ("deleteWhen=4am", "expected hours of the day 00-23"),
    ("deleteWhen=01;25", "expected hours of the day 00-23"),
    ("messageDelayLevel=1s 5x", "expected space-separated <number><s|m|h|d> levels"),
    ("flushIntervalCommitLog=fast", "expected an integer"),
    ("messageIndexEnable=yes", "expected true or false"),
    ("mappedFileSizeCommitLog=0", "expected a number > 0"),
    ("mappedFileSizeConsumeQueue=300001", "expected a positive multiple of 20"),
    ("serverChannelMaxIdleTimeSeconds=2m", "expected an integer"),
    ("maxConnections=-1", "expected 0 (no limit) or a number > 0"),
    ("maxInFlightRequestsPerConnection=-5", "expected 0 (no limit) or a number > 0"),
    ("clusterTest=true", "cluster-test mode is not implemented in FerryMQ"),
    ("namesrvAddr=localhost", "expected 'host:port' addresses separated by ';'"),
    ("namesrvAddr=127.0.0.1:9876;10.0.0.2:98760", "expected 'host:port' addresses separated by ';'"),
    ("brokerIP1=broker.example", "expected an IPv4 or IPv6 address"),
    ("brokerPermission=99", "expected permission bits 0-15"),
    ("aclEnable=true", "ACL 1.0 was removed in Apache 5.3.3"),
    ("authenticationWhitelist=34,HEART_BEAT", "expected request codes separated by ','"),
    ('initAuthenticationUser={"username":"rocketmq"}', 'expected a JSON object with "username", "password"'),
    ("enableDLegerCommitLog=true", "this replication mode is not implemented yet in FerryMQ"),
    ("controllerAddr=controller-1", "expected 'host:port' addresses separated by ';'"),
]


@pytest.mark.parametrize(("line", "expected"), BAD_VALUES, ids=[line for line, _ in BAD_VALUES])
def test_standalone_refuses_a_bad_value_in_one_line(tmp_path, line, expected):
    conf = write_conf(tmp_path, line)
    error = the_error_line(run("standalone", "-c", str(conf)))
    assert error.startswith(f"ferrymq standalone: {conf}: {line}: ")
    assert expected in error
    assert not (tmp_path / "store").exists()  # refused before anything started


@pytest.mark.parametrize(("command", "line"), [
    ("broker", "flushDiskType=FOO"),
    ("broker", "listenPort=99999"),
    ("broker", "brokerRole=SLAVE"),
    ("broker", "maxIndexNum=many"),
    ("broker", "metricsAuthEnabled=true"),  # without authenticationEnabled
    ("broker", "grpcClientProducerMaxAttempts=0"),
    ("broker", "recallMessageEnable=true"),
    ("namesrv", "listenPort=99999"),
    ("namesrv", "scanNotActiveBrokerInterval=5s"),
    ("namesrv", "notifyMinBrokerIdChanged=true"),
])
def test_broker_and_namesrv_refuse_a_bad_value_in_one_line(tmp_path, command, line):
    conf = write_conf(tmp_path, line)
    error = the_error_line(run(command, "-c", str(conf)))
    assert error.startswith(f"ferrymq {command}: {conf}: {line}: ")


def test_a_bad_namesrv_option_is_refused_without_blaming_the_file(tmp_path):
    conf = write_conf(tmp_path, "brokerName=b")
    error = the_error_line(run("broker", "-c", str(conf), "-n", "localhost"))
    assert error.startswith("ferrymq broker: namesrvAddr=localhost: not valid, expected 'host:port' addresses")


def test_a_file_that_is_not_utf8_is_refused_in_one_line(tmp_path):
    conf = tmp_path / "latin1.conf"
    conf.write_bytes(b"brokerName=b\nbrokerClusterName=caf\xe9\n")
    error = the_error_line(run("broker", "-c", str(conf)))
    assert error == f"ferrymq broker: {conf}: line 2 is not UTF-8 text (byte 0xe9); save the file as UTF-8"


def test_a_taken_broker_port_names_listenPort(tmp_path):
    with taken_port() as port:
        result = run("standalone", "-c", str(write_conf(tmp_path, f"listenPort={port}")))
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert result.stderr.splitlines()[-1] == (
        f"ferrymq standalone: listenPort {port} is in use (by another process?): set listenPort in the config "
        "file, or stop the other process"
    )


def test_a_taken_namesrv_port_names_namesrvListenPort(tmp_path):
    with taken_port() as port:
        conf = write_conf(tmp_path, f"namesrvListenPort={port}\nlistenPort=0")
        result = run("standalone", "-c", str(conf))
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert f"ferrymq standalone: namesrvListenPort {port} is in use" in result.stderr.splitlines()[-1]


@pytest.mark.parametrize("line", [
    "brokerId=0", "brokerRole=ASYNC_MASTER", "brokerRole=SYNC_MASTER", "flushDiskType=SYNC_FLUSH",
    "flushDiskType=ASYNC_FLUSH", "deleteWhen=01;04", "listenPort=0", "listenPort=65535", "haListenPort=10912",
    "namesrvAddr=127.0.0.1:9876;[::1]:9877", "brokerIP1=::1", "brokerPermission=4",
    "brokerRole=SLAVE\nbrokerId=1", "slaveReadEnable=true", "haMasterAddress=127.0.0.1:10912",
])
def test_valid_values_and_defaults_spelled_out_are_accepted(tmp_path, line):
    result = run("standalone", "-c", str(write_conf(tmp_path, line)), "-p")
    assert result.returncode == 0, result.stderr
    assert set(line.splitlines()) <= set(result.stdout.splitlines())


def test_planned_features_set_to_false_start_without_a_warning(tmp_path, caplog):
    conf = write_conf(tmp_path, "aclEnable=false\nenableDLegerCommitLog=false")
    assert run("standalone", "-c", str(conf), "-p").returncode == 0
    with caplog.at_level(logging.WARNING, logger="ferrymq"):
        cli._warn_unknown(cli._read_props(str(conf)), cfg.NamesrvConfig, cfg.NettyServerConfig, cfg.BrokerConfig,
                          MessageStoreConfig, cfg.StandaloneConfig, cfg.PlannedFeatures)
    assert caplog.text == ""


def test_apache_4x_spellings_are_read_as_the_current_keys(tmp_path, caplog):
    conf = write_conf(tmp_path, "mapedFileSizeCommitLog=1048576\nmapedFileSizeConsumeQueue=6000")
    result = run("standalone", "-c", str(conf), "-p")
    assert result.returncode == 0, result.stderr
    printed = result.stdout.splitlines()
    assert "mappedFileSizeCommitLog=1048576" in printed and "mappedFileSizeConsumeQueue=6000" in printed
    with caplog.at_level(logging.INFO, logger="ferrymq"):
        props = cli._read_props(str(conf))
    assert props["mappedFileSizeCommitLog"] == "1048576" and "mapedFileSizeCommitLog" not in props
    assert "mapedFileSizeCommitLog is Apache 4.x's spelling of mappedFileSizeCommitLog" in caplog.text


def test_the_current_spelling_wins_over_the_old_one():
    props = cfg.current_names({"mappedFileSizeCommitLog": "2048", "mapedFileSizeCommitLog": "1024"})
    assert cfg.from_properties(MessageStoreConfig, props).mappedFileSizeCommitLog == 2048
    assert cfg.from_properties(cfg.BrokerConfig, props).mappedFileSizeCommitLog == 2048


def test_a_misspelled_key_is_warned_with_the_nearest_known_key(caplog):
    props = {"flushIntervalComitLog": "200", "listenport": "1", "zzqqxx": "1"}
    with caplog.at_level(logging.WARNING, logger="ferrymq"):
        cli._warn_unknown(props, cfg.BrokerConfig, cfg.NettyServerConfig, MessageStoreConfig)
    assert "'flushIntervalComitLog' is not known to FerryMQ and is ignored; did you mean flushIntervalCommitLog?" \
        in caplog.text
    assert "'listenport' is not known to FerryMQ and is ignored; did you mean listenPort?" in caplog.text
    assert "'zzqqxx' is not known to FerryMQ and is ignored (check its spelling)" in caplog.text


def test_a_master_id_is_always_0_and_ha_port_follows_listen_port():
    master = cfg.from_properties(cfg.BrokerConfig, {"brokerId": "3", "listenPort": "20911"})
    assert master.brokerId == 0 and master.ha_port() == 20912 and master.ha_port(3000) == 3001
    slave = cfg.from_properties(cfg.BrokerConfig, {"brokerRole": "SLAVE", "brokerId": "2", "haListenPort": "7000"})
    assert slave.brokerId == 2 and slave.ha_port(3000) == 7000 and slave.is_slave


def _every_key(*classes: type) -> set[str]:
    return {f.name for cls in classes for f in dataclasses.fields(cls)} - {"storeHost"}


@pytest.mark.parametrize(("command", "classes"), [
    ("standalone", (cfg.NamesrvConfig, cfg.NettyServerConfig, cfg.BrokerConfig, MessageStoreConfig,
                    cfg.StandaloneConfig)),
    ("broker", (cfg.NettyServerConfig, cfg.BrokerConfig, MessageStoreConfig)),
    ("namesrv", (cfg.NamesrvConfig, cfg.NettyServerConfig)),
])
def test_help_and_print_config_list_every_key(tmp_path, command, classes):
    helped = run(command, "--help")
    assert helped.returncode == 0
    described = {line.split()[0] for line in helped.stdout.splitlines() if "(default " in line}
    assert _every_key(*classes) <= described
    for store_key in ("flushIntervalCommitLog (default 500)", "messageIndexEnable (default true)"):
        assert (store_key in helped.stdout) == (MessageStoreConfig in classes)
    printed = run(command, "-p")
    assert printed.returncode == 0, printed.stderr
    assert _every_key(*classes) <= {line.split("=")[0] for line in printed.stdout.splitlines()}


def test_the_repository_configs_pass_the_checks():
    for conf in sorted((ROOT / "conf").glob("*.conf")):
        result = run("standalone", "-c", str(conf), "-p")
        assert result.returncode == 0, f"{conf}: {result.stderr}"


def test_the_benchmark_harness_config_passes_the_checks(tmp_path):
    from benchmarks.sidebyside.brokers import broker_settings
    from compat_tests.apache import write_conf as write_apache_conf

    for flush in ("ASYNC_FLUSH", "SYNC_FLUSH"):
        settings = broker_settings(tmp_path / "store", 20911, 20912, "127.0.0.1:9876", flush)
        conf = write_apache_conf(tmp_path / "standalone.conf", {**settings, "namesrvListenPort": 19876})
        result = run("standalone", "-c", str(conf), "-p")
        assert result.returncode == 0, result.stderr
        assert f"flushDiskType={flush}" in result.stdout.splitlines()


def test_a_bind_address_of_another_host_names_bindAddress(tmp_path):
    conf = write_conf(tmp_path, "bindAddress=192.0.2.1\nlistenPort=0")  # TEST-NET-1: never this host's
    result = run("namesrv", "-c", str(conf))
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert result.stderr.splitlines()[-1] == (
        "ferrymq namesrv: bindAddress 192.0.2.1 is not an address of this host: set bindAddress in the config file "
        "(0.0.0.0 = every address)"
    )


def test_a_taken_ha_port_names_haListenPort(tmp_path):
    with taken_port() as port:
        conf = write_conf(tmp_path, f"listenPort=0\nhaListenPort={port}\nhttpListenPort=0\nmqttListenPort=0\ngrpcListenPort=0")
        result = run("broker", "-c", str(conf))
    assert result.returncode != 0 and "Traceback" not in result.stderr
    assert result.stderr.splitlines()[-1].startswith(f"ferrymq broker: haListenPort={port}: cannot listen there")
