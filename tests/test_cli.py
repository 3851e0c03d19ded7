"""The ferrymq command line as an operator uses it: help, config files, start, serve, SIGTERM."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ferrymq.server import cli
from ferrymq.wire.properties import parse_properties
from ferrymq.server.config import ConfigError, NamesrvConfig, load_properties, namesrv_config

from .cli_process import run_cli

FERRYMQ = [sys.executable, "-m", "ferrymq.server.cli"]
ROOT = Path(__file__).resolve().parents[1]


def run(*args: str, timeout: float = 20) -> subprocess.CompletedProcess:
    return run_cli(*args, cwd=ROOT, timeout=timeout)


def test_help_lists_every_namesrv_key_with_default(capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["namesrv", "--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    for key in ("listenPort (default 9876)", "kvConfigPath", "scanNotActiveBrokerInterval (default 5000)",
                "serverChannelMaxIdleTimeSeconds (default 120)", "orderMessageEnable (default false)"):
        assert key in out


def test_help_of_broker_and_standalone_documents_broker_keys(capsys):
    with pytest.raises(SystemExit):
        cli.main(["standalone", "--help"])
    out = capsys.readouterr().out
    assert "storePathRootDir (default ./data)" in out
    assert "brokerClusterName (default DefaultCluster)" in out


def test_broker_print_config_applies_file_and_namesrv_option(tmp_path):
    conf = tmp_path / "broker.conf"
    conf.write_text("brokerName=b1\nlistenPort=20911\n")
    result = run("broker", "-c", str(conf), "-n", "127.0.0.1:9999", "-p")
    assert result.returncode == 0, result.stderr
    assert "brokerName=b1" in result.stdout and "namesrvAddr=127.0.0.1:9999" in result.stdout


@pytest.mark.parametrize("command", [["gateway", "http", "-n", "127.0.0.1:9876"], ["standalone"], ["broker"]])
def test_print_config_hides_the_check_back_secret(tmp_path, command):
    conf = tmp_path / "broker.conf"
    conf.write_text("httpCheckBackSecret=s3cr3t-hmac-key\n")
    result = run(*command, "-c", str(conf), "-p")
    assert result.returncode == 0, result.stderr
    assert "s3cr3t" not in result.stdout
    assert "httpCheckBackSecret=<hidden>" in result.stdout


def test_print_config_applies_file(tmp_path):
    conf = tmp_path / "ns.conf"
    conf.write_text("# a comment\nlistenPort = 19876\n! also a comment\norderMessageEnable=true\n")
    result = run("namesrv", "-c", str(conf), "-p")
    assert result.returncode == 0, result.stderr
    assert "listenPort=19876" in result.stdout
    assert "orderMessageEnable=true" in result.stdout


def test_bad_value_is_a_clear_config_error(tmp_path):
    conf = tmp_path / "ns.conf"
    conf.write_text("listenPort=ninety\n")
    result = run("namesrv", "-c", str(conf))
    assert result.returncode == cli.EXIT_CONFIG
    assert "listenPort" in result.stderr and "ninety" in result.stderr


def test_properties_parsing_rules():
    props = parse_properties("a=1\n  b : two words \nc 3\n# x=y\nlong=one\\\n   two\nempty=\n")
    assert props == {"a": "1", "b": "two words", "c": "3", "long": "onetwo", "empty": ""}
    with pytest.raises(ConfigError):
        load_properties("/nonexistent/ferrymq.conf")
    ns, netty = namesrv_config({"listenPort": "1234", "scanNotActiveBrokerInterval": "10000"}, "/x.conf")
    assert (netty.listenPort, ns.scanNotActiveBrokerInterval, ns.configStorePath) == (1234, 10000, "/x.conf")
    assert namesrv_config({})[1].listenPort == 9876
    assert NamesrvConfig().brokerChannelExpiredTime == 120000


def _start(args, tmp_path):
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    proc = subprocess.Popen([*FERRYMQ, *args], cwd=ROOT, stderr=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
    deadline = time.monotonic() + 15
    lines = []
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        lines.append(line)
        match = re.search(r"name server listening on [\d.]+:(\d+)", line)
        if match:
            return proc, int(match.group(1)), lines
    proc.kill()
    raise AssertionError("name server did not report its address:\n" + "".join(lines))


@pytest.mark.parametrize("command", ["namesrv", "standalone"])
def test_started_from_config_serves_routes_and_stops_on_sigterm(tmp_path, command):
    conf = tmp_path / "ns.conf"
    key = "listenPort" if command == "namesrv" else "namesrvListenPort"
    broker_keys = (f"listenPort=0\nstorePathRootDir={tmp_path / 'store'}\nmappedFileSizeCommitLog=1048576\n"
                   if command == "standalone" else "")
    conf.write_text(f"{key}=0\nbindAddress=127.0.0.1\nkvConfigPath={tmp_path / 'kv.json'}\n" + broker_keys)
    stacks = tmp_path / "stalls.txt"
    proc, port, lines = _start([command, "-c", str(conf), "--stall-traceback", str(stacks)], tmp_path)
    try:
        from ferrymq.sdk.errors import MQResponseError
        from tests.namesrv.conftest import PlayingBroker
        from ferrymq.wire.bodies import TopicConfig

        with PlayingBroker(f"127.0.0.1:{port}") as admin:
            with pytest.raises(MQResponseError):
                admin.get_route_info("TopicTest")
            admin.register_broker("DefaultCluster", "127.0.0.1:10911", "broker-a", 0, "",
                                  [TopicConfig("TopicTest", 4, 4, 6), TopicConfig("TBW102", 8, 8, 7)])
            assert admin.get_route_info("TopicTest").broker_datas[0].broker_name == "broker-a"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
        rest = proc.stderr.read()
        assert "broker registered: broker-a" in "".join(lines) + rest
        assert "name server stopped" in rest
        assert stacks.exists()  # --stall-traceback reached the watch
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.parametrize(("command", "log_file"), [("namesrv", "namesrv.log"), ("standalone", "broker.log")])
def test_log_dir_gets_the_log_rolled_over_at_its_size(tmp_path, command, log_file):
    """With --log-dir the log goes to Apache's file name there, not to stderr, and rolls over at
    --log-max-size, keeping --log-backups files (FILE.1 the newest)."""
    conf = tmp_path / "s.conf"
    conf.write_text(f"listenPort=0\nnamesrvListenPort=0\nbindAddress=127.0.0.1\nkvConfigPath={tmp_path / 'kv.json'}\n"
                    f"storePathRootDir={tmp_path / 'store'}\nmappedFileSizeCommitLog=1048576\n")
    logs = tmp_path / "logs" / "nested"  # created if missing
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    proc = subprocess.Popen([*FERRYMQ, command, "-c", str(conf), "--log-dir", str(logs), "--log-max-size", "1K",
                             "--log-backups", "50"], cwd=ROOT, stderr=subprocess.PIPE, text=True, env=env)
    try:
        deadline = time.monotonic() + 15
        while "listening on" not in _read_logs(logs, log_file) and time.monotonic() < deadline:
            assert proc.poll() is None, proc.stderr.read()
            time.sleep(0.05)
        port = re.search(r"name server listening on 127\.0\.0\.1:(\d+)", _read_logs(logs, log_file)).group(1)
        from ferrymq.sdk.blocking import BlockingAdmin

        with BlockingAdmin(f"127.0.0.1:{port}") as admin:  # answered: the reactor runs, SIGTERM stops it cleanly
            admin.get_all_topics()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.stderr.read() == ""
    text = _read_logs(logs, log_file)
    assert text.rstrip().endswith("INFO ferrymq: stopped")
    rolled = sorted(logs.glob(f"{log_file}.*"))
    assert rolled, "the log did not roll over at 1K"
    assert all(path.stat().st_size <= 1024 for path in rolled)


def _read_logs(logs: Path, log_file: str) -> str:
    """The log and its rolled-over files, oldest first (FILE.N is the oldest, FILE the newest)."""
    paths = sorted(logs.glob(f"{log_file}.*"), key=lambda p: -int(p.suffix[1:])) + [logs / log_file]
    return "".join(p.read_text() for p in paths if p.exists())


def test_log_size_option_is_checked(capsys):
    assert cli.build_parser().parse_args(["broker", "--log-max-size", "128M"]).log_max_size == 128 << 20
    assert cli.build_parser().parse_args(["broker", "--log-max-size", "4096"]).log_max_size == 4096
    with pytest.raises(SystemExit):
        cli.build_parser().parse_args(["broker", "--log-max-size", "lots"])
    assert "is not a size" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli.build_parser().parse_args(["broker", "--log-backups", "0"])
    assert "at least 1" in capsys.readouterr().err


def test_stall_threshold_option_is_checked_and_reaches_the_watch(capsys):
    args = cli.build_parser().parse_args(["standalone", "--stall-threshold", "4"])
    watch = cli._stall_watch(args)
    try:
        assert (watch.threshold, watch.interval) == (0.004, 0.004 / 5)
    finally:
        watch.cpu.close()
    default = cli._stall_watch(cli.build_parser().parse_args(["broker"]))
    default.cpu.close()
    assert default.threshold == 0.25
    for bad in ("0", "soon"):
        with pytest.raises(SystemExit):
            cli.build_parser().parse_args(["broker", "--stall-threshold", bad])
    assert "must be more than 0 ms" in capsys.readouterr().err


def test_log_dir_that_cannot_be_written_is_one_line(tmp_path, capsys):
    a_file = tmp_path / "not-a-dir"
    a_file.write_text("")
    assert cli.main(["namesrv", "--log-dir", str(a_file)]) == 1
    assert f"ferrymq namesrv: cannot write the log in {a_file}" in capsys.readouterr().err


def test_port_in_use_is_reported(tmp_path):
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        conf = tmp_path / "ns.conf"
        conf.write_text(f"listenPort={taken.getsockname()[1]}\nbindAddress=127.0.0.1\nkvConfigPath={tmp_path / 'kv.json'}\n")
        result = run("namesrv", "-c", str(conf))
    assert result.returncode == 1
    port = conf.read_text().split("=")[1].split()[0]
    assert f"listenPort {port} is in use (by another process?): set listenPort in the config file" in result.stderr
    assert "Traceback" not in result.stderr
