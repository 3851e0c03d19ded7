"""The web console as a person uses it: pages of one `ferrymq standalone` (topics, a group with lag, a
consuming group, a transaction checked back) loaded in headless Chromium. Each test reads the rendered
page's text and numbers and holds them against the broker's figures read with the SDK's admin client,
and looks at the screenshots: something drawn, the TPS plot's line there, nothing past the window's
right edge. One browser serves the whole module. The console of ``ferrymq gateway http -n`` in front of
Apache RocketMQ is compat_tests/test_console.py's."""

from __future__ import annotations

import re
import time
from types import SimpleNamespace

import httpx
import pytest

from ferrymq.gateways.console.html import NAV
from ferrymq.gateways.console.plot import PUT_COLOUR
from ferrymq.gateways.http import groups
from ferrymq.sdk import BlockingMQAdmin, BlockingProducer, BlockingPushConsumer, ClientConfig, Message
from ferrymq.testing.server import FerryMQServer

from ..check_back_receiver import Receiver
from ..http_client import wait_for
from .chromium import Chromium
from .dom import Page
from .screen import assert_drawn, assert_fits, count_near, pixels

pytestmark = pytest.mark.timeout(180)

TOPIC, QUIET_TOPIC = "ConsoleOrders", "ConsoleAudit"
LAGGING, CONSUMING = "ConsoleBilling", "ConsoleAlerts"
SENT = 12
#: the messages sent after LAGGING went away
LAG = 5
SECRET = "console-check-back-secret"
BROKER_KEYS = {"consoleSampleInterval": 500, "transactionTimeOut": 500, "transactionCheckInterval": 1000,
               "httpCheckBackSecret": SECRET}
#: the stylesheet's page background
BACKGROUND = "#f6f8fa"



@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with FerryMQServer(tmp_path_factory.mktemp("console"), BROKER_KEYS, http=True) as srv:
        yield srv


@pytest.fixture(scope="module")
def admin(server):
    with BlockingMQAdmin(server.namesrv_addr) as a:
        yield a


def _consumer(server, group: str) -> BlockingPushConsumer:
    consumer = BlockingPushConsumer(group, consume_from_where="CONSUME_FROM_FIRST_OFFSET",
                                    config=ClientConfig(server.namesrv_addr, persist_consumer_offset_interval=0.2))
    consumer.subscribe(TOPIC, "*")
    consumer.register_listener(lambda msgs, context: None)
    consumer.start()
    return consumer


def _lag(admin, group: str) -> int | None:
    return groups.summary(group, admin.consume_stats(group))["lag"]


@pytest.fixture(scope="module")
def scenario(server, admin):
    """SENT messages with keys on TOPIC, consumed by LAGGING and CONSUMING; then LAGGING went away and LAG
    more came, which CONSUMING, still online, consumed; a transaction answered UNKNOWN, then COMMIT by its
    check-back receiver (its message is stored in TOPIC too)."""
    server.create_topic(TOPIC, 4)
    server.create_topic(QUIET_TOPIC, 2)
    consuming, lagging = _consumer(server, CONSUMING), _consumer(server, LAGGING)
    receiver = Receiver(SECRET)
    http = httpx.Client(base_url=server.http_url)
    try:
        with BlockingProducer("ConsoleShop", server.namesrv_addr) as producer:
            sent = [producer.send(Message(TOPIC, f"order {i}".encode(), tags="paid",
                                          keys=[f"order-{i}", f"customer-{i % 3}"])) for i in range(SENT)]
            wait_for(lambda: _lag(admin, LAGGING) == 0)
            lagging.shutdown()
            late = [producer.send(Message(TOPIC, f"late {i}".encode(), tags="late", keys=f"late-{i}"))
                    for i in range(LAG)]
        tx = http.post(f"/v1/topics/{TOPIC}/transactions", json={
            "producerGroup": "ConsoleTx", "checkBackUrl": receiver.url, "message": {"body": "pending order"}}).json()
        receiver.plans[tx["transactionId"]] = ["UNKNOWN", "COMMIT"]
        tx = wait_for(lambda: (t := http.get(f"/v1/transactions/{tx['transactionId']}").json())["state"] == "COMMIT"
                       and t)
        wait_for(lambda: _lag(admin, CONSUMING) == 0)
        yield SimpleNamespace(sent=sent, late=late, tx=tx)
    finally:
        http.close()
        receiver.close()
        consuming.shutdown()


@pytest.fixture(scope="module")
def browser():
    chromium = Chromium()
    yield chromium
    chromium.close()


def _see(browser: Chromium, server, path: str):
    seen = browser.see(server.http_url + path)
    return seen, Page(seen.dom)


def test_the_cluster_page_shows_the_broker_and_plots_tps(server, scenario, admin, browser):
    seen, page = _see(browser, server, "/console/")
    (row,) = page.tables["brokers"]
    runtime = admin.runtime_info(server.broker_addr)
    cluster, name, bid, role, addr, version, put_tps, get_tps, disk, up = row
    assert (cluster, name, bid, role, addr, version) == (server.cluster, server.broker_name, "0", "MASTER",
                                                         server.broker_addr, runtime["brokerVersionDesc"])
    assert float(put_tps) >= 0 and float(get_tps) >= 0
    assert abs(float(disk) - float(runtime["commitLogDiskRatio"])) < 0.01
    booted_s = (time.time() * 1000 - int(runtime["bootTimestamp"])) / 1000
    h, m, s = map(int, re.fullmatch(r"(\d\d):(\d\d):(\d\d)", up).groups())
    assert abs(h * 3600 + m * 60 + s - booted_s) < 5
    put_line = next(p for p in page.polylines if p["class"] == "plot-put")
    points = [tuple(map(float, p.split(","))) for p in put_line["points"].split()]
    assert len(points) >= 3 and points == sorted(points), "one point per sample, oldest first"
    assert float(page.texts["put-tps"]) >= 0

    image = pixels(seen)
    assert_drawn(image)
    assert count_near(image, PUT_COLOUR) > 500, "the put line of the TPS plot is not drawn"
    assert_fits(seen, image, BACKGROUND)


def test_the_topics_pages_show_queues_offsets_and_put_tps(server, scenario, admin, browser):
    # the topics' offsets are sampled from the first page view on: their TPS shows from the second sample
    wait_for(lambda: all(r[4] for r in Page(httpx.get(f"{server.http_url}/console/topics").text).tables["topics"]))
    _, page = _see(browser, server, "/console/topics")
    rows = {r[0]: r for r in page.tables["topics"]}
    assert set(rows) == {TOPIC, QUIET_TOPIC}, "system, retry and cluster topics are not listed"
    for topic, expected in ((TOPIC, SENT + LAG + 1), (QUIET_TOPIC, 0)):
        stats = admin.topic_stats(topic)
        _, queues, min_offsets, max_offsets, put_tps, _ = rows[topic]
        assert (int(queues), int(min_offsets), int(max_offsets)) == (
            len(stats.offset_table), sum(o.min_offset for o in stats.offset_table.values()), expected)
        assert float(put_tps) >= 0

    seen, page = _see(browser, server, f"/console/topics/{TOPIC}")
    stats = admin.topic_stats(TOPIC)
    assert page.tables["queues"] == [
        [mq.broker_name, str(mq.queue_id), str(o.min_offset), str(o.max_offset), page.tables["queues"][i][4]]
        for i, (mq, o) in enumerate(sorted(stats.offset_table.items(), key=lambda i: i[0].queue_id))]
    assert all(row[4] for row in page.tables["queues"] if row[3] != "0"), "a queue with messages shows its last store"
    image = pixels(seen)
    assert_drawn(image)
    assert_fits(seen, image, BACKGROUND)


def test_the_groups_pages_show_lag_per_group_and_per_queue(server, scenario, admin, browser):
    _, page = _see(browser, server, "/console/groups")
    lags = {r[0]: r[1] for r in page.tables["groups"]}
    # LAGGING has not seen the LAG late messages nor the committed transaction's
    assert lags[LAGGING] == str(LAG + 1)
    assert lags[CONSUMING] == "0"
    assert set(lags) == {LAGGING, CONSUMING}, "the groups every broker creates for itself are not listed"

    seen, page = _see(browser, server, f"/console/groups/{LAGGING}")
    detail = groups.detail(LAGGING, admin.consume_stats(LAGGING))
    assert page.fields["group-figures"]["Lag"] == str(detail["lag"]) == str(LAG + 1)
    assert [r[:6] for r in page.tables["queues"]] == [
        [q["topic"], q["brokerName"], str(q["queueId"]), str(q["brokerOffset"]), str(q["consumerOffset"]),
         str(q["lag"])] for q in detail["queues"]]
    image = pixels(seen)
    assert_drawn(image)
    assert_fits(seen, image, BACKGROUND)


def test_a_message_is_found_by_offset_id_unique_key_and_key_with_its_trace(server, scenario, admin, browser):
    result = scenario.sent[5]
    by_offset = _see(browser, server, f"/console/messages?topic={TOPIC}&msgId={result.offset_msg_id}")[1]
    seen, by_unique = _see(browser, server, f"/console/messages?topic={TOPIC}&msgId={result.msg_id}")
    msg = admin.message_by_id(TOPIC, result.offset_msg_id)
    for page in (by_offset, by_unique):
        shown = page.fields["message"]
        assert (shown["Topic"], shown["Message id (UNIQ_KEY)"], shown["Offset message id"], shown["Tag"],
                shown["Keys"], shown["Queue"], shown["Queue offset"]) == (
            TOPIC, result.msg_id, result.offset_msg_id, "paid", "order-5 customer-2",
            str(result.message_queue.queue_id), str(result.queue_offset))
        assert dict(page.tables["properties"]) == msg.properties
        assert page.texts["body"] == "order 5"
        tracks = {t.group: t.track_type for t in admin.message_tracks(msg)}
        assert {r[0]: r[1] for r in page.tables["trace"]} == tracks
    assert tracks[CONSUMING] == "CONSUMED"
    assert tracks[LAGGING] == "NOT_ONLINE", "its consumer went away"
    assert_fits(seen, pixels(seen), BACKGROUND)

    _, by_key = _see(browser, server, f"/console/messages?topic={TOPIC}&key=customer-1")
    expected = sorted(r.msg_id for i, r in enumerate(scenario.sent) if i % 3 == 1)
    assert sorted(r[0] for r in by_key.tables["found"]) == expected
    assert sorted(r[1] for r in by_key.tables["found"]) == sorted(
        r.offset_msg_id for i, r in enumerate(scenario.sent) if i % 3 == 1)


def test_a_transaction_page_shows_its_check_back_history(server, scenario, browser):
    tx = scenario.tx
    _, listing = _see(browser, server, "/console/transactions")
    assert [tx["transactionId"], TOPIC, "ConsoleTx", "COMMIT", "checkBack", str(len(tx["checkBacks"]))] in [
        r[:6] for r in listing.tables["transactions"]]
    seen, page = _see(browser, server, f"/console/transactions/{tx['transactionId']}")
    assert page.fields["transaction"]["State"] == "COMMIT"
    assert page.fields["transaction"]["Resolved by"] == "checkBack"
    assert [(r[1], r[3], r[4]) for r in page.tables["check-backs"]] == [
        (str(c["checkTimes"]), str(c["status"]), c["answer"]) for c in tx["checkBacks"]]
    assert [r[4] for r in page.tables["check-backs"]][-2:] == ["UNKNOWN", "COMMIT"]
    assert_fits(seen, pixels(seen), BACKGROUND)


@pytest.mark.parametrize(("path", "status", "field"), [
    (f"/console/messages?topic={TOPIC}&msgId=not-an-id", 400, "msgId"),
    (f"/console/messages?topic={TOPIC}&msgId={'0' * 32}", 404, "msgId"),
    (f"/console/messages?topic={TOPIC}&key=nobody", 404, "key"),
    ("/console/messages?msgId=0A", 400, "topic"),
    ("/console/messages?topic=bad!topic&key=k", 400, "topic"),
    (f"/console/messages?topic={TOPIC}&key=k&msgId={'0' * 32}", 400, "key"),
    ("/console/messages?topic=NoSuchTopic&key=k", 404, "topic"),
    ("/console/messages?topic=T&when=now", 400, "when"),
    ("/console/topics/NoSuchTopic", 404, "topic"),
    ("/console/groups/NoSuchGroup", 404, "group"),
    ("/console/groups/bad%20group", 400, "group"),
    ("/console/transactions/12", 400, "id"),
    (f"/console/transactions/{'A' * 32}", 404, "id"),
])
def test_a_bad_lookup_is_a_page_naming_the_field(server, scenario, path, status, field):
    r = httpx.get(server.http_url + path)
    page = Page(r.text)
    assert (r.status_code, r.headers["content-type"], page.texts["problem-field"]) == (
        status, "text/html; charset=utf-8", field), r.text
    assert page.title.startswith(str(status)) and page.texts["problem"]


def test_every_page_is_linked_from_the_navigation(server, scenario):
    r = httpx.get(server.http_url + "/console", follow_redirects=True)
    assert r.status_code == 200
    for path, _ in NAV:
        assert f'href="/console{path}"' in r.text
