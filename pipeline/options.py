"""The data source's options, checked and typed before anything is read or written.

Names follow rocketmq-spark where it has one (``nameServer``, ``topic``, ``startingOffsets``,
``endingOffsets``, ``subExpression``, ``pullBatchSize``, ``maxOffsetsPerTrigger``); the rest follow Spark's
Kafka source (``startingTimestamp``, ``topicPattern``). Spark hands options over case-insensitively, so they are looked
up that way. Every error names the option it is about, so it reads well at ``load()``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from .queues import EARLIEST, LATEST, OffsetsJSONError, QueueRef, offsets_from_json

#: the consumer group pulls are made under when the options name none (batch reads commit nothing)
DEFAULT_CONSUMER_GROUP = "ferrymq_spark_reader"
DEFAULT_PRODUCER_GROUP = "ferrymq_spark_writer"
#: the most messages one pull asks for (the broker's own cap is 32 by default)
DEFAULT_PULL_BATCH_SIZE = 32
#: the most messages, and bytes, in one SEND_BATCH_MESSAGE request
DEFAULT_SEND_BATCH_SIZE = 128
SEND_BATCH_BYTES = 1024 * 1024


class OptionError(ValueError):
    """An option is missing, malformed, or names something the cluster does not have."""

    def __init__(self, option: str, problem: str):
        super().__init__(f"rocketmq option {option}: {problem}")
        self.option = option


@dataclass(frozen=True)
class OffsetSpec:
    """Where a range starts or ends, before the cluster turns it into numbers: a placeholder
    (:data:`EARLIEST` / :data:`LATEST`) for every queue, per-queue offsets, or a point in time."""

    default: int = EARLIEST
    per_queue: tuple[tuple[QueueRef, int], ...] = ()
    timestamp_ms: int | None = None

    def for_queue(self, queue: QueueRef) -> int:
        return dict(self.per_queue).get(queue, self.default)


@dataclass(frozen=True)
class ReadOptions:
    name_server: str
    topics: tuple[str, ...] = ()
    topic_pattern: str | None = None
    starting: OffsetSpec = OffsetSpec(EARLIEST)
    ending: OffsetSpec = OffsetSpec(LATEST)
    #: the broker-side filter: a tag expression, or SQL92 when ``expression_type`` says so
    expression: str = "*"
    expression_type: str = "TAG"
    pull_batch_size: int = DEFAULT_PULL_BATCH_SIZE
    consumer_group: str = DEFAULT_CONSUMER_GROUP
    #: streaming: the most offsets one micro-batch advances, summed over the queues (None: no bound)
    max_offsets_per_trigger: int | None = None
    #: streaming: write each committed micro-batch's end offsets back as the consumer group's offsets
    commit_offsets: bool = False


@dataclass(frozen=True)
class WriteOptions:
    name_server: str
    topic: str | None = None
    producer_group: str = DEFAULT_PRODUCER_GROUP
    batch_size: int = DEFAULT_SEND_BATCH_SIZE


READ_OPTIONS = ("nameServer", "topic", "topicPattern", "startingOffsets", "endingOffsets", "startingTimestamp",
                "endingTimestamp", "subExpression", "sql92", "pullBatchSize", "consumerGroup", "maxOffsetsPerTrigger",
                "commitOffsets")
WRITE_OPTIONS = ("nameServer", "topic", "producerGroup", "sendBatchSize")
#: options Spark itself passes along with the format's own (lower-cased)
SPARK_OPTIONS = {"path", "checkpointlocation"}


class _Options:
    """Case-insensitive access that refuses names outside ``known`` (a misspelt option is an error)."""

    def __init__(self, given: Mapping[str, str], known: tuple[str, ...]):
        self._given = {k.lower(): v for k, v in given.items()}
        unknown = sorted(set(self._given) - {k.lower() for k in known} - SPARK_OPTIONS)
        if unknown:
            raise OptionError(unknown[0], f"not an option of the rocketmq format (it takes {', '.join(known)})")

    def get(self, name: str) -> str | None:
        value = self._given.get(name.lower())
        return value.strip() if value is not None and value.strip() else None

    def require(self, name: str) -> str:
        value = self.get(name)
        if value is None:
            raise OptionError(name, "required")
        return value

    def positive_int(self, name: str, default: int) -> int:
        value = self.get(name)
        if value is None:
            return default
        if not value.isdigit() or int(value) < 1:
            raise OptionError(name, f"{value!r} is not a positive whole number")
        return int(value)

    def boolean(self, name: str) -> bool:
        value = self.get(name)
        if value is None or value.lower() == "false":
            return False
        if value.lower() != "true":
            raise OptionError(name, f"{value!r} is not true or false")
        return True

    def timestamp(self, name: str) -> int | None:
        value = self.get(name)
        if value is not None and not value.isdigit():
            raise OptionError(name, f"{value!r} is not a time in milliseconds since the epoch")
        return int(value) if value is not None else None


def _offsets(opts: _Options, name: str, default: int, timestamp_option: str) -> OffsetSpec:
    timestamp = opts.timestamp(timestamp_option)
    value = opts.get(name)
    if timestamp is not None:
        if value is not None:
            raise OptionError(name, f"give {name} or {timestamp_option}, not both")
        return OffsetSpec(default, timestamp_ms=timestamp)
    if value is None:
        return OffsetSpec(default)
    if value.lower() == "earliest":
        if default == LATEST:
            raise OptionError(name, "'earliest' cannot end a range: use 'latest' or per-queue JSON")
        return OffsetSpec(EARLIEST)
    if value.lower() == "latest":
        return OffsetSpec(LATEST)
    if not value.startswith("{"):
        raise OptionError(name, f"{value!r} is not 'earliest', 'latest' or per-queue JSON "
                                '({"topic": {"broker": {"queueId": offset}}})')
    try:
        per_queue = offsets_from_json(value)
    except OffsetsJSONError as exc:
        raise OptionError(name, f"malformed offsets JSON: {exc}") from None
    if default == LATEST and EARLIEST in per_queue.values():
        raise OptionError(name, f"{EARLIEST} (earliest) cannot end a range")
    return OffsetSpec(default, tuple(sorted(per_queue.items())))


def read_options(given: Mapping[str, str]) -> ReadOptions:
    opts = _Options(given, READ_OPTIONS)
    name_server = opts.require("nameServer")
    topic, pattern = opts.get("topic"), opts.get("topicPattern")
    if (topic is None) == (pattern is None):
        raise OptionError("topic", "give topic (one name or a comma-separated list) or topicPattern, one of them")
    if pattern is not None:
        try:
            re.compile(pattern)
        except re.error as exc:
            raise OptionError("topicPattern", f"not a regular expression: {exc}") from None
    topics = tuple(t.strip() for t in topic.split(",") if t.strip()) if topic else ()
    tag_expression, sql = opts.get("subExpression"), opts.get("sql92")
    if tag_expression is not None and sql is not None:
        raise OptionError("sql92", "give subExpression (tags) or sql92, not both")
    consumer_group = opts.get("consumerGroup")
    commit_offsets = opts.boolean("commitOffsets")
    if commit_offsets and consumer_group is None:
        raise OptionError("commitOffsets", "needs consumerGroup: the group whose offsets the stream writes")
    return ReadOptions(
        name_server=name_server,
        topics=topics,
        topic_pattern=pattern,
        starting=_offsets(opts, "startingOffsets", EARLIEST, "startingTimestamp"),
        ending=_offsets(opts, "endingOffsets", LATEST, "endingTimestamp"),
        expression=sql if sql is not None else (tag_expression or "*"),
        expression_type="SQL92" if sql is not None else "TAG",
        pull_batch_size=opts.positive_int("pullBatchSize", DEFAULT_PULL_BATCH_SIZE),
        consumer_group=consumer_group or DEFAULT_CONSUMER_GROUP,
        max_offsets_per_trigger=(opts.positive_int("maxOffsetsPerTrigger", 1)
                                 if opts.get("maxOffsetsPerTrigger") is not None else None),
        commit_offsets=commit_offsets,
    )


def stream_options(given: Mapping[str, str]) -> ReadOptions:
    """A streaming read's options: a read's, without an end."""
    for name in ("endingOffsets", "endingTimestamp"):
        if name.lower() in {k.lower() for k in given}:
            raise OptionError(name, "a stream has no end: give it to batch reads only")
    return read_options(given)


def write_options(given: Mapping[str, str]) -> WriteOptions:
    opts = _Options(given, WRITE_OPTIONS)
    return WriteOptions(
        name_server=opts.require("nameServer"),
        topic=opts.get("topic"),
        producer_group=opts.get("producerGroup") or DEFAULT_PRODUCER_GROUP,
        batch_size=opts.positive_int("sendBatchSize", DEFAULT_SEND_BATCH_SIZE),
    )
