"""The gateway's OpenAPI 3.1 document, and the request checks compiled from it.

One description serves three readers: ``/openapi.json`` for tools, fastjsonschema for checking request
bodies and query strings (compiled once, at import), and the tests, which hold every answer against it.
The schemas keep to the part of JSON Schema that draft 7 and OpenAPI 3.1 share, so fastjsonschema
compiles them as written.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

import fastjsonschema

from ferrymq.wire.topics import TOPIC_MAX_LENGTH

#: the media type of a JSON envelope (one message, or ``{"messages": [...]}``); any other body is raw
ENVELOPE_TYPE = "application/vnd.ferrymq.message+json"

_NAME = {"type": "string", "minLength": 1, "maxLength": TOPIC_MAX_LENGTH, "pattern": "^[%|a-zA-Z0-9_-]+$"}
_PROBLEM_REF = {"$ref": "#/components/schemas/Problem"}

SCHEMAS: dict[str, Any] = {
    "Properties": {
        "description": "User properties; numbers and booleans are sent as their text, as RocketMQ keeps "
                       "every property as a string (SQL92 filters compare them as numbers again).",
        "type": "object",
        "additionalProperties": {"type": ["string", "number", "boolean"]},
    },
    "Envelope": {
        "type": "object",
        "properties": {
            "body": {"type": "string", "description": "The payload: text, or base64 with bodyEncoding."},
            "bodyEncoding": {"enum": ["text", "base64"], "default": "text"},
            "tag": {"type": "string", "minLength": 1, "pattern": "^[^|]+$",
                    "description": "One tag (RocketMQ TAGS); consumers filter on it."},
            "keys": {"oneOf": [{"type": "string", "minLength": 1},
                               {"type": "array", "items": {"type": "string", "minLength": 1}, "minItems": 1}],
                     "description": "Message keys, indexed for lookup (queryMsgByKey)."},
            "properties": {"$ref": "#/components/schemas/Properties"},
            "contentType": {"type": "string", "description": "Kept as the CONTENT_TYPE property."},
            "delayLevel": {"type": "integer", "minimum": 1,
                           "description": "One of the broker's messageDelayLevel levels (1 = the first)."},
            "deliverAt": {"type": "integer", "minimum": 0,
                          "description": "Epoch milliseconds (RocketMQ 5.x timer message)."},
            "shardingKey": {"type": "string", "minLength": 1,
                            "description": "Messages with one key go to one queue, in order (hash of the key)."},
        },
        "required": ["body"],
        "additionalProperties": False,
    },
    "Batch": {
        "type": "object",
        "properties": {"messages": {"type": "array", "items": {"$ref": "#/components/schemas/Envelope"},
                                    "minItems": 1, "maxItems": 1024}},
        "required": ["messages"],
        "additionalProperties": False,
    },
    "SendResult": {
        "type": "object",
        "properties": {
            "msgId": {"type": "string", "description": "The message id consumers see (UNIQ_KEY)."},
            "offsetMsgId": {"type": "string", "description": "The broker's id of the stored record."},
            "topic": {"type": "string"},
            "brokerName": {"type": "string"},
            "queueId": {"type": "integer"},
            "queueOffset": {"type": "integer"},
            "status": {"enum": ["SEND_OK", "FLUSH_DISK_TIMEOUT", "FLUSH_SLAVE_TIMEOUT", "SLAVE_NOT_AVAILABLE"]},
        },
        "required": ["msgId", "topic", "brokerName", "queueId", "queueOffset", "status"],
    },
    "BatchResult": {
        "type": "object",
        "properties": {"results": {"type": "array", "items": {"$ref": "#/components/schemas/SendResult"}}},
        "required": ["results"],
    },
    "Message": {
        "type": "object",
        "properties": {
            "receiptHandle": {"type": "string", "description": "Ack or nack the message with it."},
            "msgId": {"type": "string"},
            "topic": {"type": "string"},
            "tag": {"type": ["string", "null"]},
            "keys": {"type": "array", "items": {"type": "string"}},
            "properties": {"type": "object", "additionalProperties": {"type": "string"}},
            "body": {"type": "string"},
            "bodyEncoding": {"enum": ["text", "base64"]},
            "brokerName": {"type": "string"},
            "queueId": {"type": "integer"},
            "queueOffset": {"type": "integer"},
            "bornTimestamp": {"type": "integer"},
            "storeTimestamp": {"type": "integer"},
            "reconsumeTimes": {"type": "integer"},
            "invisibleUntil": {"type": "integer", "description": "Epoch ms; unacknowledged by then, it is "
                                                                 "delivered again (reconsumeTimes + 1)."},
        },
        "required": ["receiptHandle", "msgId", "topic", "body", "bodyEncoding", "queueId", "queueOffset",
                     "reconsumeTimes"],
    },
    "Messages": {
        "type": "object",
        "properties": {"messages": {"type": "array", "items": {"$ref": "#/components/schemas/Message"}}},
        "required": ["messages"],
    },
    "Receipts": {
        "type": "object",
        "properties": {
            "group": _NAME,
            "receiptHandles": {"type": "array", "items": {"type": "string", "minLength": 1}, "minItems": 1,
                               "maxItems": 1024},
            "delayLevel": {"type": "integer", "minimum": -1, "description": "nack only: the retry's delay "
                           "level; 0 (default) lets the broker choose 3 + reconsumeTimes, -1 sends the message "
                           "straight to the dead-letter queue."},
        },
        "required": ["group", "receiptHandles"],
        "additionalProperties": False,
    },
    "Settled": {
        "type": "object",
        "properties": {"settled": {"type": "integer"}},
        "required": ["settled"],
    },
    "NewTopic": {
        "type": "object",
        "properties": {
            "topic": _NAME,
            "queueNums": {"type": "integer", "minimum": 1, "maximum": 1024, "default": 8},
            "perm": {"enum": [2, 4, 6], "default": 6},
            "order": {"type": "boolean", "default": False},
        },
        "required": ["topic"],
        "additionalProperties": False,
    },
    "Topics": {
        "type": "object",
        "properties": {"topics": {"type": "array", "items": {"type": "string"}}},
        "required": ["topics"],
    },
    "Problem": {
        "type": "object",
        "properties": {
            "type": {"type": "string"}, "title": {"type": "string"}, "status": {"type": "integer"},
            "detail": {"type": "string"},
            "field": {"type": "string", "description": "What was wrong: a JSON pointer into the body, "
                                                       "query.<name> or path.<name>."},
            "code": {"type": "integer", "description": "The broker's RocketMQ response code."},
            "instance": {"type": "string"},
        },
        "required": ["type", "title", "status", "detail"],
    },
}


def _problems(*statuses: int) -> dict[str, Any]:
    return {str(s): {"description": "Refused; the problem names the field.",
                     "content": {"application/problem+json": {"schema": _PROBLEM_REF}}} for s in statuses}


def _json(ref: str, description: str) -> dict[str, Any]:
    return {"description": description,
            "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{ref}"}}}}


def _query(name: str, schema: dict, description: str, required: bool = False) -> dict[str, Any]:
    return {"name": name, "in": "query", "required": required, "schema": schema, "description": description}


_TOPIC_PATH = {"name": "topic", "in": "path", "required": True, "schema": _NAME}
_GROUP = _query("group", _NAME, "The consumer group.", required=True)

PUBLISH_QUERY = [
    _query("tag", {"type": "string", "minLength": 1, "pattern": "^[^|]+$"}, "Raw body only: the message tag."),
    _query("keys", {"type": "string", "minLength": 1}, "Raw body only: keys, separated by spaces."),
    _query("delayLevel", {"type": "integer", "minimum": 1}, "Raw body only: delay level."),
    _query("deliverAt", {"type": "integer", "minimum": 0}, "Raw body only: delivery time, epoch ms."),
    _query("shardingKey", {"type": "string", "minLength": 1}, "Raw body only: ordered by this key."),
]
#: how a consume or stream request consumes its group: RocketMQ's two message models
MODEL_QUERY = [
    _query("model", {"enum": ["CLUSTERING", "BROADCASTING"], "default": "CLUSTERING"},
           "CLUSTERING: the group's messages are shared among its consumers (every HTTP request of the group "
           "at this gateway is one consumer, beside Java or Go ones), offsets are the group's on the broker, "
           "and nacked messages are retried. BROADCASTING: each client (the client parameter) is one "
           "broadcasting consumer instance of the group and gets every message, from the end of each queue "
           "when it first asks on; its offsets are kept by this gateway (a local offset file, as a Java "
           "broadcasting consumer keeps them), so it continues where it left off after a pause or a gateway "
           "restart; a message it nacks or does not ack in time is skipped (no retry topic in BROADCASTING). "
           "A group is consumed one way at a time at one gateway (409)."),
    _query("client", {"type": "string", "minLength": 1, "maxLength": 64, "pattern": "^[a-zA-Z0-9_-]+$"},
           "BROADCASTING only (and required there): the consumer instance this request consumes as; its "
           "client id at the brokers is <gateway ip>@http-<client>."),
]
CONSUME_QUERY = [
    _GROUP,
    _query("expression", {"type": "string", "minLength": 1, "default": "*"},
           "Which messages: a tag expression (TagA || TagB, * for all) or an SQL92 condition."),
    _query("type", {"enum": ["TAG", "SQL92"], "default": "TAG"}, "How expression is read."),
    _query("max", {"type": "integer", "minimum": 1, "maximum": 256, "default": 16}, "At most this many."),
    _query("wait", {"type": "number", "minimum": 0, "maximum": 30, "default": 10},
           "Seconds to wait for a first message when none is ready (long poll)."),
    _query("invisible", {"type": "number", "minimum": 1, "maximum": 43200, "default": 30},
           "Seconds the client has to ack; after that the message is delivered again."),
    _query("maxReconsumeTimes", {"type": "integer", "minimum": 0, "maximum": 16, "default": 16},
           "Deliveries again after a nack or an expired invisibility before the message goes to the group's "
           "dead-letter queue %DLQ%<group> (the Java consumer's maxReconsumeTimes)."),
    *MODEL_QUERY,
]

# Transactions. A half message has its own operation rather than a member of the publish envelope: it
# answers a transaction (201, Location /v1/transactions/{id}) instead of a SendResult, it cannot be
# batched, delayed or ordered (Apache's transactional producer refuses or clears those too), and it
# needs a producer group and a check-back URL that a plain publish has no use for.
_TRANSACTION_STATE = {"enum": ["UNKNOWN", "COMMIT", "ROLLBACK"]}
SCHEMAS |= {
    "NewTransaction": {
        "type": "object",
        "properties": {
            "producerGroup": {**_NAME, "description": "The transactional producer group; the brokers ask this "
                                                      "gateway about its half messages."},
            "checkBackUrl": {"type": "string", "pattern": "^https?://[^\\s]+$", "maxLength": 2048,
                             "description": "Where the gateway asks (POST, signed) whether this half message's "
                                            "local transaction committed, when it is still UNKNOWN once the "
                                            "broker's transactionTimeOut has passed."},
            "message": {"$ref": "#/components/schemas/Envelope"},
        },
        "required": ["producerGroup", "checkBackUrl", "message"],
        "additionalProperties": False,
    },
    "TransactionAction": {
        "type": "object",
        "properties": {"action": {"enum": ["commit", "rollback"]}},
        "required": ["action"],
        "additionalProperties": False,
    },
    "CheckBack": {
        "type": "object",
        "properties": {
            "time": {"type": "integer", "description": "Epoch ms the broker's check reached the gateway."},
            "checkTimes": {"type": "integer", "description": "The broker's count of checks of this message."},
            "url": {"type": ["string", "null"], "description": "The receiver called; null when the gateway "
                                                               "answered from its own record (resolved)."},
            "status": {"type": ["integer", "null"], "description": "The receiver's HTTP status; null if none."},
            "answer": _TRANSACTION_STATE,
            "latencyMs": {"type": "integer"},
            "detail": {"type": ["string", "null"], "description": "Why the answer is UNKNOWN, when the "
                                                                  "receiver did not say so itself."},
        },
        "required": ["time", "checkTimes", "url", "status", "answer", "latencyMs", "detail"],
    },
    "Transaction": {
        "type": "object",
        "properties": {
            "transactionId": {"type": "string", "description": "The broker's transaction id (the msgId)."},
            "msgId": {"type": "string"},
            "topic": {"type": "string"},
            "tag": {"type": ["string", "null"]},
            "keys": {"type": "array", "items": {"type": "string"}},
            "producerGroup": {"type": "string"},
            "checkBackUrl": {"type": "string"},
            "brokerName": {"type": "string"},
            "state": _TRANSACTION_STATE,
            "resolvedBy": {"enum": ["client", "checkBack", None], "description": "Who decided: a request to "
                           "/v1/transactions/{id}, or a check-back answer."},
            "createdAt": {"type": "integer"},
            "resolvedAt": {"type": ["integer", "null"]},
            "checkBacks": {"type": "array", "items": {"$ref": "#/components/schemas/CheckBack"},
                           "description": "The latest check-backs, oldest first (at most 64 are kept)."},
        },
        "required": ["transactionId", "msgId", "topic", "producerGroup", "checkBackUrl", "brokerName", "state",
                     "resolvedBy", "createdAt", "resolvedAt", "checkBacks"],
    },
    "CheckBackRequest": {
        "type": "object",
        "description": "What the gateway POSTs to checkBackUrl.",
        "properties": {
            "transactionId": {"type": "string"}, "msgId": {"type": "string"}, "producerGroup": {"type": "string"},
            "topic": {"type": "string"}, "tag": {"type": ["string", "null"]},
            "keys": {"type": "array", "items": {"type": "string"}},
            "properties": {"type": "object", "additionalProperties": {"type": "string"}},
            "body": {"type": "string"}, "bodyEncoding": {"enum": ["text", "base64"]},
            "bornTimestamp": {"type": "integer"},
            "checkTimes": {"type": "integer", "description": "1 for the broker's first check; after "
                                                             "transactionCheckMax the message is discarded."},
        },
        "required": ["transactionId", "msgId", "producerGroup", "topic", "tag", "keys", "properties", "body",
                     "bodyEncoding", "bornTimestamp", "checkTimes"],
    },
    "CheckBackAnswer": {
        "type": "object",
        "description": "The receiver's answer (200). Anything else, or no answer within httpCheckBackTimeout, "
                       "counts as UNKNOWN: the broker asks again later.",
        "properties": {"state": _TRANSACTION_STATE},
        "required": ["state"],
    },
}

#: a transaction id is its half message's UNIQ_KEY: hex digits (32 for an IPv4 producer, more for IPv6)
_TRANSACTION_PATH = {"name": "id", "in": "path", "required": True,
                     "schema": {"type": "string", "pattern": "^[0-9A-Fa-f]{16,128}$"}}
TRANSACTION_ID = re.compile(_TRANSACTION_PATH["schema"]["pattern"])
_CHECK_BACK_HEADERS = [
    {"name": "FerryMQ-Timestamp", "in": "header", "required": True, "schema": {"type": "string"},
     "description": "Epoch seconds of the call; refuse calls too old (replays)."},
    {"name": "FerryMQ-Signature", "in": "header", "required": True, "schema": {"type": "string"},
     "description": "sha256=<hex HMAC-SHA256 with httpCheckBackSecret of timestamp + '.' + the exact body>."},
]
TRANSACTION_PATHS: dict[str, Any] = {
    "/v1/topics/{topic}/transactions": {
        "parameters": [_TOPIC_PATH],
        "post": {
            "operationId": "publishTransaction",
            "summary": "Publish a half message: stored, invisible to consumers, until committed.",
            "requestBody": {"required": True, "content": {"application/json": {
                "schema": {"$ref": "#/components/schemas/NewTransaction"}}}},
            "responses": {"201": _json("Transaction", "Stored as a half message; state UNKNOWN."),
                          **_problems(400, 401, 403, 404, 413, 415, 502, 503, 504)},
            "callbacks": {"checkBack": {"{$request.body#/checkBackUrl}": {"post": {
                "summary": "The broker asks about a half message still UNKNOWN.",
                "parameters": _CHECK_BACK_HEADERS,
                "requestBody": {"required": True, "content": {"application/json": {
                    "schema": {"$ref": "#/components/schemas/CheckBackRequest"}}}},
                "responses": {"200": _json("CheckBackAnswer", "The local transaction's state.")},
            }}}},
        },
    },
    "/v1/transactions/{id}": {
        "parameters": [_TRANSACTION_PATH],
        "get": {"operationId": "getTransaction", "summary": "A transaction's state and check-back history.",
                "responses": {"200": _json("Transaction", "As this gateway knows it."), **_problems(400, 401, 404)}},
        "post": {"operationId": "endTransaction", "summary": "Commit (deliver) or roll back (drop) the half message.",
                 "requestBody": {"required": True, "content": {"application/json": {
                     "schema": {"$ref": "#/components/schemas/TransactionAction"}}}},
                 "responses": {"200": _json("Transaction", "Resolved."), **_problems(400, 401, 404, 409, 415, 502,
                                                                                     503, 504)}},
    },
}

_CONSUME_BY_NAME = {p["name"]: p for p in CONSUME_QUERY}
STREAM_QUERY = [
    *(_CONSUME_BY_NAME[n] for n in ("group", "expression", "type", "invisible", "maxReconsumeTimes")),
    _query("inflight", {"type": "integer", "minimum": 1, "maximum": 1024, "default": 32},
           "Flow control: at most this many messages handed to the stream and not yet acked or nacked (or "
           "expired); the next is sent when one of them is settled."),
    _query("heartbeat", {"type": "number", "minimum": 1, "maximum": 60, "default": 15},
           "Seconds between comment lines sent while no event is, so proxies keep the stream open."),
    *MODEL_QUERY,
]

#: the stream's events, as OpenAPI 3.2 describes a sequential media type (itemSchema); 3.1 takes it as an extension
STREAM_EVENT = {
    "type": "object",
    "description": "One Server-Sent Event: a message handed out to the stream until invisibleUntil.",
    "properties": {
        "event": {"const": "message"},
        "id": {"type": "string", "description": "The message's receipt handle (ack or nack with it)."},
        "data": {"type": "string", "contentMediaType": "application/json",
                 "contentSchema": {"$ref": "#/components/schemas/Message"},
                 "description": "The message as the long poll answers it (a Message, JSON on one line)."},
    },
    "required": ["event", "id", "data"],
}

_STREAM_PATH = {
    "/v1/topics/{topic}/stream": {
        "parameters": [_TOPIC_PATH],
        "get": {
            "operationId": "stream",
            "summary": "Receive messages as they arrive, as Server-Sent Events (push-style consumption).",
            "description": "The same consumer of the group as the long poll: each message is one event (id: "
                           "its receipt handle, data: the Message), settled with ack or nack. Comment lines "
                           "keep the stream open while nothing arrives. Closing the stream stops delivery "
                           "to it; messages it was handed and did not settle come back after their "
                           "invisibility time, as for the long poll.",
            "parameters": STREAM_QUERY,
            "responses": {"200": {"description": "An endless stream of message events.",
                                  "content": {"text/event-stream": {
                                      "schema": {"type": "string",
                                                 "description": "Events as x-itemSchema describes them."},
                                      "x-itemSchema": STREAM_EVENT}}},
                          **_problems(400, 401, 403, 404, 409, 503, 504)},
        },
    },
}

GROUP_PATH = {"name": "group", "in": "path", "required": True, "schema": _NAME}

SCHEMAS.update({
    "GroupSummary": {
        "type": "object",
        "properties": {
            "group": {"type": "string"},
            "lag": {"type": ["integer", "null"],
                    "description": "Messages not consumed yet: the sum over the group's queues (its retry "
                                   "topic's included) of broker max offset - committed offset, as mqadmin "
                                   "consumerProgress's Diff Total; null when the brokers keep no offsets for "
                                   "the group (BROADCASTING, or nothing consumed and no consumer online)."},
            "consumeTps": {"type": "number"},
        },
        "required": ["group", "lag", "consumeTps"],
    },
    "Groups": {
        "type": "object",
        "properties": {"groups": {"type": "array", "items": {"$ref": "#/components/schemas/GroupSummary"}}},
        "required": ["groups"],
    },
    "GroupProgress": {
        "allOf": [{"$ref": "#/components/schemas/GroupSummary"}],
        "type": "object",
        "properties": {"queues": {"type": "array", "items": {
            "type": "object",
            "properties": {
                "topic": {"type": "string"}, "brokerName": {"type": "string"}, "queueId": {"type": "integer"},
                "brokerOffset": {"type": "integer", "description": "The queue's max offset."},
                "consumerOffset": {"type": "integer", "description": "The group's committed offset."},
                "lag": {"type": "integer", "description": "brokerOffset - consumerOffset."},
                "lastTimestamp": {"type": "integer", "description": "Store time (epoch ms) of the last "
                                                                    "consumed message; 0 when unknown."},
            },
            "required": ["topic", "brokerName", "queueId", "brokerOffset", "consumerOffset", "lag"],
        }}},
        "required": ["queues"],
    },
})

_GROUP_PATHS = {
    "/v1/groups": {
        "get": {"operationId": "listGroups",
                "summary": "Every subscription group the brokers know, with its lag (mqadmin consumerProgress).",
                "responses": {"200": _json("Groups", "The groups, sorted by name."),
                              **_problems(400, 401, 403, 503, 504)}},
    },
    "/v1/groups/{group}": {
        "parameters": [GROUP_PATH],
        "get": {"operationId": "groupProgress",
                "summary": "One group's offsets and lag per queue (mqadmin consumerProgress -g).",
                "responses": {"200": _json("GroupProgress", "The group's queues, by topic, broker and queue."),
                              **_problems(400, 401, 403, 404, 503, 504)}},
    },
}

DOCUMENT: dict[str, Any] = {
    "openapi": "3.1.0",
    "info": {"title": "FerryMQ HTTP gateway", "version": "1",
             "description": "Publish to and consume RocketMQ topics over HTTP (docs/http.md)."},
    "paths": {
        "/openapi.json": {
            "get": {"operationId": "openapi", "summary": "This document.",
                    "responses": {"200": {"description": "OpenAPI 3.1.",
                                          "content": {"application/json": {"schema": {"type": "object"}}}}}},
        },
        "/metrics": {
            "get": {"operationId": "metrics",
                    "summary": "Prometheus metrics: the broker's figures and the process's (docs/metrics.md).",
                    "responses": {"200": {"description": "Prometheus text exposition format 0.0.4.",
                                          "content": {"text/plain": {"schema": {"type": "string"}}}},
                                  **_problems(401, 500, 503)}},
        },
        "/v1/topics": {
            "get": {"operationId": "listTopics", "summary": "Topics the name servers know.",
                    "responses": {"200": _json("Topics", "The topic names, sorted."), **_problems(401, 403, 503, 504)}},
            "post": {"operationId": "createTopic", "summary": "Create (or update) a topic on every master.",
                     "requestBody": {"required": True, "content": {"application/json": {
                         "schema": {"$ref": "#/components/schemas/NewTopic"}}}},
                     "responses": {"201": {"description": "Created."}, **_problems(400, 401, 403, 415, 503, 504)}},
        },
        "/v1/topics/{topic}/messages": {
            "parameters": [_TOPIC_PATH],
            "post": {
                "operationId": "publish",
                "summary": "Publish one message (raw body or envelope) or a batch (envelope with messages).",
                "parameters": PUBLISH_QUERY,
                "requestBody": {"required": True, "content": {
                    ENVELOPE_TYPE: {"schema": {"oneOf": [{"$ref": "#/components/schemas/Envelope"},
                                                         {"$ref": "#/components/schemas/Batch"}]}},
                    "*/*": {"schema": {"type": "string", "format": "binary"}}}},
                "responses": {"200": {"description": "Stored.", "content": {"application/json": {"schema": {
                    "oneOf": [{"$ref": "#/components/schemas/SendResult"},
                              {"$ref": "#/components/schemas/BatchResult"}]}}}},
                              **_problems(400, 401, 403, 404, 413, 415, 502, 503, 504)},
            },
            "get": {
                "operationId": "consume",
                "summary": "Receive messages as a clustering consumer of the group (long poll).",
                "parameters": CONSUME_QUERY,
                "responses": {"200": _json("Messages", "Up to max messages; none if wait passed."),
                              **_problems(400, 401, 403, 404, 409, 503, 504)},
            },
        },
        "/v1/topics/{topic}/ack": {
            "parameters": [_TOPIC_PATH],
            "post": {"operationId": "ack", "summary": "Consumed: the group's offset moves past them.",
                     "requestBody": {"required": True, "content": {"application/json": {
                         "schema": {"$ref": "#/components/schemas/Receipts"}}}},
                     "responses": {"200": _json("Settled", "All settled."), **_problems(400, 401, 403, 404, 415)}},
        },
        "/v1/topics/{topic}/nack": {
            "parameters": [_TOPIC_PATH],
            "post": {"operationId": "nack", "summary": "Not consumed: delivered again later through the "
                                                       "group's retry topic (dead-letter queue after "
                                                       "maxReconsumeTimes).",
                     "requestBody": {"required": True, "content": {"application/json": {
                         "schema": {"$ref": "#/components/schemas/Receipts"}}}},
                     "responses": {"200": _json("Settled", "All settled."), **_problems(400, 401, 403, 404, 415)}},
        },
        **TRANSACTION_PATHS,
        **_STREAM_PATH,
        **_GROUP_PATHS,
    },
    "components": {"schemas": SCHEMAS},
}


class Invalid(ValueError):
    """A request part that breaks the document: ``field`` names it, the message says how."""

    def __init__(self, field: str, message: str):
        super().__init__(message)
        self.field = field


def _compile(schema: dict[str, Any]) -> Callable[[Any], Any]:
    return fastjsonschema.compile({"$schema": "http://json-schema.org/draft-07/schema#",
                                   "components": DOCUMENT["components"], **schema})


def body_checker(ref: str) -> Callable[[Any], Any]:
    """A check of a JSON body against component ``ref``: returns it with defaults filled in, or raises
    :class:`Invalid` with a JSON pointer to the offending member."""
    check = _compile({"$ref": f"#/components/schemas/{ref}"})

    def run(value: Any) -> Any:
        try:
            return _whole_numbers(SCHEMAS[ref], check(value))
        except fastjsonschema.JsonSchemaValueException as exc:
            raise Invalid(_pointer(exc), _message(exc)) from None

    return run


def _whole_numbers(schema: dict[str, Any], value: Any) -> Any:
    """JSON's ``18.0`` is the integer 18 to JSON Schema: hand it on as the int it is, so it reaches a broker
    as ``18``, where the schema asks for an integer."""
    if "$ref" in schema:
        schema = SCHEMAS[schema["$ref"].rsplit("/", 1)[1]]
    if isinstance(value, float) and value.is_integer():
        enum = schema.get("enum")
        if schema.get("type") == "integer" or (enum and all(isinstance(e, int) for e in enum)):
            return int(value)
    elif isinstance(value, dict) and "properties" in schema:
        for name, member in schema["properties"].items():
            if name in value:
                value[name] = _whole_numbers(member, value[name])
    elif isinstance(value, list) and "items" in schema:
        return [_whole_numbers(schema["items"], item) for item in value]
    return value


def query_checker(parameters: list[dict[str, Any]]) -> Callable[[Mapping[str, str]], dict[str, Any]]:
    """A check of a query string against an operation's parameters: values are converted to their
    schema's type first (a query string holds only text); unknown names are refused."""
    properties = {p["name"]: p["schema"] for p in parameters}
    required = [p["name"] for p in parameters if p.get("required")]
    check = _compile({"type": "object", "properties": properties, "additionalProperties": False,
                      "required": required})

    def run(query: Mapping[str, str]) -> dict[str, Any]:
        values: dict[str, Any] = {}
        for name, text in query.items():
            kind = properties.get(name, {}).get("type")
            try:
                values[name] = int(text) if kind == "integer" else float(text) if kind == "number" else text
            except ValueError:
                raise Invalid(f"query.{name}", f"query parameter {name}={text!r} must be a {kind}") from None
        try:
            return check(values)
        except fastjsonschema.JsonSchemaValueException as exc:
            field = _pointer(exc)
            if exc.rule == "additionalProperties":
                unknown = sorted(set(exc.value) - set(properties))
                raise Invalid(f"query.{unknown[0]}", f"unknown query parameter {unknown[0]!r}; this operation "
                                                     f"takes {', '.join(sorted(properties))}") from None
            if exc.rule == "required":
                missing = [n for n in required if n not in values]
                raise Invalid(f"query.{missing[0]}", f"query parameter {missing[0]!r} is required") from None
            raise Invalid("query." + field.lstrip("/").split("/")[0],
                          _message(exc).replace("data.", "query parameter ")) from None

    return run


def _pointer(exc: fastjsonschema.JsonSchemaValueException) -> str:
    """``data.messages[0].tag`` as the JSON pointer ``/messages/0/tag``; for an unknown member, its name."""
    parts = [str(p) for p in exc.path[1:]]
    if exc.rule == "additionalProperties" and isinstance(exc.value, dict):
        known = exc.definition.get("properties", {})
        parts += sorted(k for k in exc.value if k not in known)[:1]
    if exc.rule == "required" and isinstance(exc.value, dict):
        parts += [k for k in exc.definition.get("required", []) if k not in exc.value][:1]
    return "/" + "/".join(parts)


def _message(exc: fastjsonschema.JsonSchemaValueException) -> str:
    return exc.message.replace("data.", "").replace("data ", "the body ", 1)
