"""The console's pages: each reads the cluster through the gateway's admin client and renders HTML.

A lookup that names nothing (an unknown topic, group, message or transaction) is a 404 page, a
malformed one a 400 page naming the field; a broker that fails or does not answer is the status
:func:`~ferrymq.gateways.http.problems.from_client_error` gives it, on a page too.

When the gateway checks users, each page needs what the broker's admin requests behind it need, as the HTTP
admin routes do: listing topics (and the transactions of every topic) ``List`` on ``Topic:*``, listing
groups ``List`` on ``Group:*``, a topic's page or a message lookup ``Get`` on the topic, a group's page
``Get`` on the group; the cluster's page and a transaction's need valid credentials only (the cluster and
runtime figures are asked with request codes Apache checks no ACL for). A refusal is the HTTP routes' 403
problem+json.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import re
import time
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import quote, urlencode

from starlette.requests import Request
from starlette.responses import HTMLResponse, Response

from ferrymq.sdk.admin_cli.command import CommandError
from ferrymq.wire.bodies import ClusterInfo
from ferrymq.wire.message import MessageConst, MessageExt
from ferrymq.wire.topics import SYS_GROUP_PREFIX, SYSTEM_GROUPS, validate_group, validate_topic

from ..access import GET
from ..access import topic as topic_key
from ..http import auth, groups
from ..http.gateway import Gateway
from ..http.messages import is_text
from ..http.problems import Problem, from_client_error
from ..http.transactions import TRANSACTIONS_KEPT
from .html import Raw, esc, fields, link, page, section, table, when
from .plot import GET_COLOUR, PUT_COLOUR, tps_svg
from .sampler import MASTER_ID, Sampler, user_topics

log = logging.getLogger("ferrymq.gateway.console")

#: a message id, offset (store host, commit-log offset) or unique (UNIQ_KEY): 16 bytes in hex
MSG_ID = re.compile(r"[0-9A-Fa-f]{32}")
#: how much of a body a message page shows
BODY_SHOWN = 4096


def application_groups(names: list[str]) -> list[str]:
    """The groups of applications: not those every broker creates for itself and the tools."""
    return [g for g in names if not g.startswith(SYS_GROUP_PREFIX) and g not in SYSTEM_GROUPS]


def first_number(text: str | None) -> float | None:
    """The 10-second figure of a broker's ``"tps10 tps60 tps600"`` text."""
    try:
        return float((text or "").split()[0])
    except (IndexError, ValueError):
        return None


def uptime(boot_ms: int, now_ms: int) -> str:
    seconds = max(0, now_ms - boot_ms) // 1000
    days, rest = divmod(seconds, 86400)
    return (f"{days}d " if days else "") + f"{rest // 3600:02d}:{rest // 60 % 60:02d}:{rest % 60:02d}"


class Pages:
    """The page handlers of the console mounted at ``base``, reading through ``gateway``'s admin client."""

    def __init__(self, gateway: Gateway, sampler: Sampler, base: str):
        self.gateway = gateway
        self.sampler = sampler
        self.base = base

    def _page(self, current: str, title: str, *content: Any, status: int = 200) -> HTMLResponse:
        return HTMLResponse(page(self.base, current, title, *content), status_code=status)

    def _message_url(self, topic: str, msg_id: str) -> str:
        return f"{self.base}/messages?{urlencode({'topic': topic, 'msgId': msg_id})}"

    # ------------------------------------------------------------------ cluster

    async def cluster(self, request: Request) -> Response:
        admin = self.gateway.admin
        info: ClusterInfo = await admin.cluster_info()
        brokers = [(cluster, name, bid, addr) for cluster, names in sorted(info.cluster_addr_table.items())
                   for name in sorted(names) if name in info.broker_addr_table
                   for bid, addr in sorted(info.broker_addr_table[name].broker_addrs.items())]
        stats = await asyncio.gather(*(admin.runtime_info(b[3]) for b in brokers), return_exceptions=True)
        now = int(time.time() * 1000)
        rows = []
        for (cluster, name, bid, addr), s in zip(brokers, stats):
            role = "MASTER" if bid == MASTER_ID else "SLAVE"
            if isinstance(s, BaseException):
                rows.append((cluster, name, bid, role, addr, f"not answering: {s}", "", "", "", ""))
                continue
            boot = int(s.get("bootTimestamp", 0) or 0)
            ratio = s.get("commitLogDiskRatio")
            rows.append((cluster, name, bid, role, addr, s.get("brokerVersionDesc", ""),
                         first_number(s.get("putTps")), first_number(s.get("getTransferredTps")),
                         f"{float(ratio):.4f}" if ratio else "", uptime(boot, now) if boot else s.get("runtime", "")))
        rates = self.sampler.rates()
        latest = rates[-1] if rates else None
        legend = Raw(f'<p class="legend"><span style="background:{PUT_COLOUR}"></span>put '
                     f'<span style="background:repeating-linear-gradient(90deg,{GET_COLOUR} 0 5px,transparent 5px 8px)">'
                     f'</span>get · sampled every '
                     f'{self.sampler.interval:g} s' + (f' · now put <b id="put-tps">{latest.put_tps:.2f}</b>, get '
                                                       f'<b id="get-tps">{latest.get_tps:.2f}</b> messages/s'
                                                       if latest else "") + "</p>")
        return self._page("/", "Cluster",
                          section("Brokers", table("brokers", ("Cluster", "Broker", "BID", "Role", "Address",
                                                               "Version", "Put TPS", "Get TPS", "Disk ratio",
                                                               "Uptime"), rows, numeric=(2, 6, 7, 8)),
                                  Raw(f'<p class="muted">Name server {esc(self.gateway.namesrv_addr)}</p>')),
                          section("Messages per second", Raw(tps_svg(rates)), legend))

    # ------------------------------------------------------------------ topics

    async def topics(self, request: Request) -> Response:
        admin = self.gateway.admin
        names = user_topics(await admin.list_topics(), await admin.cluster_info())
        tables = await asyncio.gather(*(admin.topic_stats(t) for t in names), return_exceptions=True)
        rows = []
        for topic, t in zip(names, tables):
            if isinstance(t, BaseException):
                rows.append((link(f"{self.base}/topics/{quote(topic, safe='')}", topic), "", "", "", "", f"{t}"))
                continue
            offsets = t.offset_table.values()
            tps = self.sampler.topic_tps(topic)
            rows.append((link(f"{self.base}/topics/{quote(topic, safe='')}", topic), len(t.offset_table),
                         sum(o.min_offset for o in offsets), sum(o.max_offset for o in offsets),
                         "" if tps is None else tps, when(max((o.last_update_timestamp for o in offsets), default=0))))
        return self._page("/topics", "Topics", section(None, table(
            "topics", ("Topic", "Queues", "Min offsets", "Max offsets", "Put TPS", "Last stored"), rows,
            numeric=(1, 2, 3, 4), empty="no topic yet")),
            Raw(f'<p class="muted">Put TPS is the growth of the topic\'s max offsets between the console\'s '
                f"samples (every {self.sampler.interval:g} s while its pages are looked at): it shows from the "
                "second sample on.</p>"))

    async def topic(self, request: Request) -> Response:
        topic = request.path_params["topic"]
        problem = validate_topic(topic)
        if problem:
            raise Problem(400, problem, "topic")
        try:
            stats = await self.gateway.admin.topic_stats(topic)
        except Exception as exc:  # noqa: BLE001
            raise from_client_error(exc, "topic") from None
        queues = sorted(stats.offset_table.items(), key=lambda i: (i[0].broker_name or "", i[0].queue_id))
        rows = [(mq.broker_name, mq.queue_id, o.min_offset, o.max_offset, when(o.last_update_timestamp))
                for mq, o in queues]
        tps = self.sampler.topic_tps(topic)
        return self._page("/topics", f"Topic {topic}",
                          section(None, fields("topic-figures", (("Queues", len(rows)), ("Put TPS", "" if tps is None else tps)))),
                          section("Queues", table("queues", ("Broker", "Queue", "Min offset", "Max offset",
                                                             "Last stored"), rows, numeric=(1, 2, 3))))

    # ------------------------------------------------------------------ groups

    async def groups(self, request: Request) -> Response:
        admin = self.gateway.admin
        names = application_groups(await admin.subscription_groups())
        stats = await asyncio.gather(*(groups.progress(admin, g) for g in names), return_exceptions=True)
        rows = []
        for name, s in zip(names, stats):
            summary = groups.summary(name, None if isinstance(s, BaseException) else s)
            rows.append((link(f"{self.base}/groups/{quote(name, safe='')}", name),
                         "" if summary["lag"] is None else summary["lag"], summary["consumeTps"]))
        return self._page("/groups", "Consumer groups", section(None, table(
            "groups", ("Group", "Lag", "Consume TPS"), rows, numeric=(1, 2), empty="no consumer group yet")),
            Raw('<p class="muted">Lag is what mqadmin consumerProgress calls Diff Total: per queue, the '
                "broker's max offset less the group's committed offset, summed (retry topic included). A "
                "group with no committed offset and no consumer online shows none.</p>"))

    async def group(self, request: Request) -> Response:
        name = request.path_params["group"]
        problem = validate_group(name)
        if problem:
            raise Problem(400, problem, "group")
        admin = self.gateway.admin
        try:
            if name not in await admin.subscription_groups():
                raise Problem(404, f"no broker knows the subscription group {name}", "group")
            detail = groups.detail(name, await groups.progress(admin, name))
        except Exception as exc:  # noqa: BLE001
            raise from_client_error(exc, "group") from None
        rows = [(q["topic"], q["brokerName"], q["queueId"], q["brokerOffset"], q["consumerOffset"], q["lag"],
                 when(q["lastTimestamp"])) for q in detail["queues"]]
        return self._page("/groups", f"Group {name}",
                          section(None, fields("group-figures", (("Lag", "" if detail["lag"] is None else detail["lag"]),
                                                                 ("Consume TPS", detail["consumeTps"])))),
                          section("Queues", table("queues", ("Topic", "Broker", "Queue", "Broker offset",
                                                             "Consumer offset", "Lag", "Last consumed"),
                                                  rows, numeric=(2, 3, 4, 5), empty="no offsets kept for it")))

    # ------------------------------------------------------------------ messages

    def _lookup_form(self, topic: str, msg_id: str, key: str) -> Raw:
        def form(name: str, label: str, value: str, hint: str) -> str:
            return (f'<form method=get action="{esc(self.base)}/messages"><label>Topic<input name=topic '
                    f'value="{esc(topic)}" required></label><label>{esc(label)}<input name={name} size=36 '
                    f'value="{esc(value)}" required></label><button>Look up</button>'
                    f'<span class="muted">{esc(hint)}</span></form>')

        return Raw(form("msgId", "Message id", msg_id, "an offsetMsgId or a UNIQ_KEY (msgId)")
                   + form("key", "Key", key, "one of the messages' keys"))

    async def messages(self, request: Request) -> Response:
        query = request.query_params
        unknown = sorted(set(query) - {"topic", "msgId", "key"})
        if unknown:
            raise Problem(400, f"the lookup takes topic with msgId or key, not {unknown[0]}", unknown[0])
        topic, msg_id, key = (query.get(n, "").strip() for n in ("topic", "msgId", "key"))
        form = section("Look up", self._lookup_form(topic, msg_id, key))
        if not (topic or msg_id or key):
            return self._page("/messages", "Messages", form)
        if not topic:
            raise Problem(400, "name the topic the message was sent to", "topic")
        problem = validate_topic(topic)
        if problem:
            raise Problem(400, problem, "topic")
        if msg_id and key:
            raise Problem(400, "look up by msgId or by key, not both", "key")
        if not (msg_id or key):
            raise Problem(400, "give the message's id (msgId) or one of its keys (key)", "msgId")
        self.authorize(request, GET, topic_key(topic), "query.topic")
        if msg_id:
            return await self._by_id(topic, msg_id, form)
        return await self._by_key(topic, key, form)

    async def _by_id(self, topic: str, msg_id: str, form: Raw) -> Response:
        if not MSG_ID.fullmatch(msg_id):
            raise Problem(400, f"{msg_id!r} is not a message id (32 hex digits: an offsetMsgId or a UNIQ_KEY)",
                          "msgId")
        admin = self.gateway.admin
        try:
            msg = await admin.message_by_id(topic, msg_id)
        except CommandError:
            raise Problem(404, f"no message {msg_id} in topic {topic} (a UNIQ_KEY is searched in the last three "
                               f"days)", "msgId") from None
        except Exception as exc:  # noqa: BLE001
            raise from_client_error(exc, "topic") from None
        try:
            tracks = await admin.message_tracks(msg)
            trace = table("trace", ("Consumer group", "Delivery", "Detail"),
                          [(t.group, t.track_type, t.exception or "") for t in tracks], empty="no consumer group")
        except Exception as exc:  # noqa: BLE001 - the message is still shown
            trace = Raw(f'<p class="muted">the trace could not be read: {esc(exc)}</p>')
        return self._page("/messages", f"Message {msg.msg_id}", form,
                          section("Message", _message_fields(msg)),
                          section("Properties", table("properties", ("Property", "Value"),
                                                      sorted(msg.properties.items()))),
                          section("Body", _body(msg.body)),
                          section("Delivery trace", trace,
                                  Raw('<p class="muted">As mqadmin queryMsgById shows it: per consumer group of '
                                      "the topic, whether its committed offset on the message's queue is past "
                                      "the message.</p>")))

    async def _by_key(self, topic: str, key: str, form: Raw) -> Response:
        try:
            msgs = await self.gateway.admin.messages_by_key(topic, key)
        except CommandError:
            raise Problem(404, f"no message of topic {topic} has the key {key}", "key") from None
        except Exception as exc:  # noqa: BLE001
            raise from_client_error(exc, "topic") from None
        rows = [(link(self._message_url(topic, m.msg_id), m.msg_id), m.offset_msg_id,
                 m.tags or "", m.properties.get(MessageConst.KEYS, ""), m.queue_id, m.queue_offset,
                 when(m.store_timestamp)) for m in sorted(msgs, key=lambda m: m.store_timestamp)]
        return self._page("/messages", f"Messages with key {key}", form, section(None, table(
            "found", ("Message id", "Offset message id", "Tag", "Keys", "Queue", "Queue offset", "Stored"),
            rows, numeric=(4, 5))))

    # ------------------------------------------------------------------ transactions

    async def transactions(self, request: Request) -> Response:
        rows = [(link(f"{self.base}/transactions/{tx.id}", tx.id), tx.topic, tx.producer_group, tx.state.name,
                 tx.resolved_by or "", len(tx.check_backs), when(tx.created_at))
                for tx in self.gateway.transactions.recent()]
        return self._page("/transactions", "Transactions", section(None, table(
            "transactions", ("Transaction id", "Topic", "Producer group", "State", "Resolved by", "Check-backs",
                             "Begun"), rows, numeric=(5,), empty="no transaction published over HTTP yet")),
            Raw(f'<p class="muted">The transactions published through this gateway\'s HTTP API (the newest '
                f"{TRANSACTIONS_KEPT}), with the broker's check-backs of each.</p>"))

    async def transaction(self, request: Request) -> Response:
        tx_id = request.path_params["id"]
        if not MSG_ID.fullmatch(tx_id):
            raise Problem(400, f"{tx_id!r} is not a transaction id (the UNIQ_KEY of its half message: 32 hex "
                               "digits)", "id")
        tx = self.gateway.transactions.get(tx_id)
        if tx is None:
            raise Problem(404, f"no transaction {tx_id} was published through this gateway (it keeps the newest "
                               f"{TRANSACTIONS_KEPT})", "id")
        rows = [(when(c.time), c.check_times, c.url or "", "" if c.status is None else c.status, c.answer.name,
                 c.latency_ms, c.detail or "") for c in tx.check_backs]
        return self._page("/transactions", f"Transaction {tx.id}",
                          section(None, fields("transaction", (
                              ("Topic", tx.topic), ("Tag", tx.tag or ""), ("Keys", " ".join(tx.keys)),
                              ("Producer group", tx.producer_group), ("State", tx.state.name),
                              ("Resolved by", tx.resolved_by or ""), ("Begun", when(tx.created_at)),
                              ("Resolved", when(tx.resolved_at)), ("Check-back URL", tx.check_back_url),
                              ("Message", link(self._message_url(tx.topic, tx.msg_id), tx.msg_id))))),
                          section("Check-backs", table("check-backs", ("Time", "Check", "URL", "HTTP status",
                                                                       "Answer", "Latency (ms)", "Detail"),
                                                       rows, numeric=(1, 3, 5), empty="not checked back")))

    # ------------------------------------------------------------------ errors

    def guarded(self, handler: Callable[[Request], Awaitable[Response]], current: str, action: str | None = None,
                resource: Callable[[Request], str] | None = None, field: str | None = None):
        """``handler``, for a user allowed ``action`` on the ``resource`` the request names (when the
        gateway checks users), its refusals and failures shown as pages with their status."""

        async def run(request: Request) -> Response:
            self.sampler.viewed()
            try:
                self.gateway.require_started()
                if action is not None and resource is not None:
                    self.authorize(request, action, resource(request), field)
                return await handler(request)
            except Problem as problem:
                if problem.status == 403:
                    return problem.response(request.url.path)
                return self._problem(current, problem)
            except Exception as exc:  # noqa: BLE001
                try:
                    return self._problem(current, from_client_error(exc))
                except Exception:  # not an SDK failure
                    log.exception("console page %s failed", request.url.path)
                    return self._problem(current, Problem(500, "the console failed on this page; its log has "
                                                               "the details"))

        return run

    def authorize(self, request: Request, action: str, resource: str, field: str | None) -> None:
        """Raises a 403 :class:`Problem` unless the request's user may do ``action`` on ``resource`` (the
        user the console's mount found: ``ferrymq.gateways.http.app._logged_in``)."""
        access = self.gateway.access
        if access is not None:
            auth.authorize(access, request.state.user, action, resource,
                           request.client.host if request.client else "", field)

    def _problem(self, current: str, problem: Problem) -> HTMLResponse:
        detail = Raw(f'<p id="problem">{esc(problem.detail)}</p>')
        where = Raw(f'<p>Field: <code id="problem-field">{esc(problem.field)}</code></p>') if problem.field else ""
        return self._page(current, f"{problem.status} {_REASONS.get(problem.status, 'Error')}",
                          section(None, detail, where, cls="error"), status=problem.status)


_REASONS = {400: "Bad request", 404: "Not found", 409: "Conflict", 500: "Console error", 502: "Broker error",
            503: "Unavailable", 504: "Broker timeout"}


def _message_fields(msg: MessageExt) -> Raw:
    return fields("message", (
        ("Topic", msg.topic), ("Message id (UNIQ_KEY)", msg.uniq_key or ""), ("Offset message id", msg.offset_msg_id),
        ("Tag", msg.tags or ""), ("Keys", msg.properties.get(MessageConst.KEYS, "")), ("Queue", msg.queue_id),
        ("Queue offset", msg.queue_offset), ("Commit-log offset", msg.commitlog_offset),
        ("Reconsume times", msg.reconsume_times), ("Born", when(msg.born_timestamp)),
        ("Stored", when(msg.store_timestamp)), ("Born host", "{}:{}".format(*msg.born_host)),
        ("Store host", "{}:{}".format(*msg.store_host)), ("System flag", msg.sys_flag), ("Body size", len(msg.body))))


def _body(body: bytes) -> Raw:
    shown = body[:BODY_SHOWN]
    more = f" (the first {BODY_SHOWN} of {len(body)} bytes)" if len(body) > BODY_SHOWN else ""
    if is_text(shown):
        return Raw(f'<pre id="body">{esc(shown.decode())}</pre><p class="muted">text{esc(more)}</p>')
    return Raw(f'<pre id="body">{esc(base64.b64encode(shown).decode())}</pre><p class="muted">base64{esc(more)}</p>')
