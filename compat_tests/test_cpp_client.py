"""Issue 4: the third official client, Apache's Python binding of the C++ client (rocketmq-client-python
0.5.0rc2, its manylinux wheel bundling librocketmq.so), against Apache RocketMQ and FerryMQ: producer,
push consumer and transactional producer. Each run is a subprocess (compat_tests/cpp_client.py), so a
native crash fails the test and not pytest; the Java 5.x client is the other end of each exchange.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections import defaultdict

import pytest

from .harness import ScenarioResult, _run
from .servers import TRANSACTION_CHECK_INTERVAL_MS, TRANSACTION_CHECK_MAX, TRANSACTION_TIMEOUT_MS
from .test_official_clients import WAIT, bodies, fresh, write_spec

WHEEL = "rocketmq-client-python==0.5.0rc2"


def _importable() -> bool:
    return subprocess.run([sys.executable, "-c", "import rocketmq.client"], capture_output=True).returncode == 0


@pytest.fixture(scope="session")
def cpp(compat_home):
    """Runs cpp_client.py commands; installs the binding into this interpreter's environment if absent."""
    if not _importable():
        proc = subprocess.run([sys.executable, "-m", "pip", "install", "--only-binary=:all:", WHEEL],
                              capture_output=True, text=True, timeout=600)
        if proc.returncode != 0:
            pytest.fail(f"could not install {WHEEL} (a manylinux wheel; needs x86-64 Linux):\n{proc.stderr[-3000:]}")
    home = compat_home / "cpp-client"
    home.mkdir(exist_ok=True)
    env = {**os.environ, "HOME": str(home)}  # the C++ client logs under ~/logs/rocketmq-cpp

    def run(command: str, *args: str, timeout: float = 120) -> ScenarioResult:
        argv = [sys.executable, "-m", "compat_tests.cpp_client", command, *args]
        proc = _run(argv, timeout, env=env)
        return ScenarioResult(argv, proc.returncode, proc.stdout, proc.stderr)

    return run


def test_cpp_producer_sync_and_oneway(server, cpp, java5):
    """The C++ producer's sync sends answer SendStatus.OK with a message id; sync and oneway messages, with tag
    and keys, reach a Java consumer intact."""
    topic, group = fresh("CppSend")
    ns = server.namesrv_addr
    sync = cpp("send", "-n", ns, "-t", topic, "--count", "3", "--tag", "TagCpp", "--keys", "cpp-key",
               "--body", "cpp-sync").check()
    assert [e["status"] for e in sync.of("sent")] == ["OK"] * 3, sync.explain()  # the binding's SendStatus.OK
    assert all(e["msgId"] for e in sync.of("sent"))
    cpp("send", "-n", ns, "-t", topic, "--count", "2", "--mode", "oneway", "--body", "cpp-oneway").check()
    got = java5("consume", "-n", ns, "-t", topic, "-g", group, "-count", "5", "-timeout", str(WAIT * 1000),
                "-linger", "1000").check()
    assert sorted(bodies(got)) == sorted([f"cpp-sync #{i}" for i in range(3)] + [f"cpp-oneway #{i}" for i in range(2)])
    synced = [e for e in got.of("received") if e["body"].startswith("cpp-sync")]
    assert {(e["tags"], e["keys"]) for e in synced} == {("TagCpp", "cpp-key")}, got.explain()
    assert {e["msgId"] for e in synced} == {e["msgId"] for e in sync.of("sent")}


def test_cpp_push_consumer_with_tag_expression(server, cpp, java5, tmp_path):
    """The C++ push consumer subscribed with `TagA || TagB` receives exactly the Java producer's TagA and
    TagB messages."""
    topic, group = fresh("CppConsume")
    ns = server.namesrv_addr
    spec = [{"body": f"{tag}-{i}", "tag": tag} for tag in ("TagA", "TagB", "TagC") for i in range(2)]
    java5("send", "-n", ns, "-t", topic, "-spec", write_spec(tmp_path, spec)).check()
    got = cpp("consume", "-n", ns, "-t", topic, "-g", group, "--count", "4", "--expr", "TagA || TagB",
              "--timeout", str(WAIT), "--linger", "2").check()
    assert sorted(bodies(got)) == ["TagA-0", "TagA-1", "TagB-0", "TagB-1"], got.explain()


def test_cpp_transactional_producer(server, cpp, java5, tmp_path):
    """The C++ transactional producer: committed, rolled back, and UNKNOW-then-COMMIT-on-check-back
    messages; a Java consumer gets exactly the two committed ones (and the plain warm-up message), and
    only the UNKNOW one was checked back."""
    topic, group = fresh("CppTx")
    ns = server.namesrv_addr
    modes = ("commit", "rollback", "unknown-commit")
    spec = [{"body": f"tx-{m}", "keys": f"key-{m}", "props": {"txmode": m}} for m in modes]
    # The C++ client heartbeats when a producer starts only to brokers it has routes for, then every 30 s,
    # and a broker checks back only with producer groups that heartbeated (Apache: "channel table is
    # empty", and the half message is discarded after transactionCheckMax). So a plain producer of the
    # same process first sends a "warm-up" message, and the transactional producer starts after it.
    # The producer leaves as soon as the UNKNOW one was checked; the bound is generous for a loaded machine.
    linger = (TRANSACTION_TIMEOUT_MS + (TRANSACTION_CHECK_MAX + 12) * TRANSACTION_CHECK_INTERVAL_MS) / 1000
    res = cpp("txn", "-n", ns, "-t", topic, "--group", f"{group}_producer", "--spec", write_spec(tmp_path, spec),
              "--linger", str(linger), "--warm-up", timeout=linger + 60).check()
    assert len(res.of("sent")) == 3, res.explain()
    checks = defaultdict(int)
    for e in res.of("check"):
        checks[e["keys"]] += 1
    assert set(checks) == {"key-unknown-commit"}, f"check-backs: {dict(checks)}\n{res.explain()}"
    got = java5("consume", "-n", ns, "-t", topic, "-g", group, "-count", "3", "-timeout", str(WAIT * 1000),
                "-linger", "3000").check()
    assert sorted(bodies(got)) == ["tx-commit", "tx-unknown-commit", "warm-up"], got.explain()
