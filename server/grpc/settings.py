"""The settings a client syncs over Telemetry, and the server's part of them.

A client sends its ``Settings`` first thing on its Telemetry stream; the server answers with them
completed by its own: a producer gets the retry policy for its sends and the largest body accepted
(the proxy's ``grpcClientProducer*`` keys and ``maxMessageSize``), which the SDK then enforces itself;
a consumer gets its group's: whether it is FIFO (``consumeMessageOrderly``), its delivery attempts
(``retryMaxTimes`` + 1) and the backoff between them (``groupRetryPolicy``), and the batch size and
long-polling time of its receives (:class:`ConsumerPolicy`).
"""

from __future__ import annotations

from google.protobuf.duration_pb2 import Duration

from .policies import ConsumerPolicy, ProducerPolicy
from .protocol import pb


def _duration(millis: int) -> Duration:
    return Duration(seconds=millis // 1000, nanos=(millis % 1000) * 1_000_000)


#: Apache's CustomizedRetryPolicy default: 1s 5s 10s 30s 1m..10m 20m 30m 1h 2h
DEFAULT_RETRY_DELAYS_MS = (1_000, 5_000, 10_000, 30_000, *(m * 60_000 for m in (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 20, 30)),
                           3_600_000, 7_200_000)


def retry_policy(group) -> pb.RetryPolicy:
    """A consumer group's delivery attempts and the backoff between them (its ``groupRetryPolicy``:
    CUSTOMIZED, a list of delays, unless EXPONENTIAL)."""
    raw = getattr(group, "group_retry_policy", None) or {}
    policy = pb.RetryPolicy(max_attempts=group.retry_max_times + 1)
    if raw.get("type") == "EXPONENTIAL":
        exp = raw.get("exponentialRetryPolicy") or {}
        policy.exponential_backoff.CopyFrom(pb.ExponentialBackoff(
            initial=_duration(int(exp.get("initial", 5_000))), max=_duration(int(exp.get("max", 7_200_000))),
            multiplier=int(exp.get("multiplier", 2))))
    else:
        delays = (raw.get("customizedRetryPolicy") or {}).get("next") or DEFAULT_RETRY_DELAYS_MS
        policy.customized_backoff.CopyFrom(pb.CustomizedBackoff(next=[_duration(int(ms)) for ms in delays]))
    return policy


def retry_delay_ms(group, reconsume_times: int) -> int:
    """The delay before a message of ``group`` is delivered again after ``reconsume_times`` (its
    ``groupRetryPolicy``'s nextDelayDuration: a CUSTOMIZED list is read from its third delay on)."""
    raw = getattr(group, "group_retry_policy", None) or {}
    times = max(reconsume_times, 0)
    if raw.get("type") == "EXPONENTIAL":
        exp = raw.get("exponentialRetryPolicy") or {}
        initial, ceiling = int(exp.get("initial", 5_000)), int(exp.get("max", 7_200_000))
        return min(ceiling, initial * int(exp.get("multiplier", 2)) ** min(times, 32))
    delays = (raw.get("customizedRetryPolicy") or {}).get("next") or DEFAULT_RETRY_DELAYS_MS
    return int(delays[min(times + 2, len(delays) - 1)])


def answer(settings: pb.Settings, producer: ProducerPolicy, max_body_size: int, consumer: ConsumerPolicy | None = None,
           group=None) -> pb.Settings:
    """The settings the server answers a client's with: a producer's completed by ``producer`` and the largest
    body accepted; a consumer's by ``consumer`` and its ``group`` (a SubscriptionGroupConfig, None when the
    broker has none: then as sent); metrics off (the server collects none from clients)."""
    merged = pb.Settings()
    merged.CopyFrom(settings)
    if settings.HasField("subscription") and group is not None:
        consumer = consumer or ConsumerPolicy()
        merged.subscription.receive_batch_size = consumer.grpcClientConsumerLongPollingBatchSize
        merged.subscription.long_polling_timeout.CopyFrom(
            _duration(consumer.grpcClientConsumerMaxLongPollingTimeoutMillis))
        merged.subscription.fifo = group.consume_message_orderly
        merged.backoff_policy.CopyFrom(retry_policy(group))
    if settings.HasField("publishing"):
        merged.backoff_policy.CopyFrom(pb.RetryPolicy(
            max_attempts=producer.grpcClientProducerMaxAttempts,
            exponential_backoff=pb.ExponentialBackoff(
                initial=_duration(producer.grpcClientProducerBackoffInitialMillis),
                max=_duration(producer.grpcClientProducerBackoffMaxMillis),
                multiplier=producer.grpcClientProducerBackoffMultiplier)))
        merged.publishing.max_body_size = max_body_size
        merged.publishing.validate_message_type = producer.enableTopicMessageTypeCheck
    merged.metric.CopyFrom(pb.Metric(on=False))
    return merged
