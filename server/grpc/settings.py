"""The settings a client syncs over Telemetry, and the server's part of them.

A client sends its ``Settings`` first thing on its Telemetry stream; the server answers with them
completed by its own: a producer gets the retry policy for its sends and the largest body accepted
(the proxy's ``grpcClientProducer*`` keys and ``maxMessageSize``), which the SDK then enforces itself.
"""

from __future__ import annotations

from dataclasses import dataclass

from google.protobuf.duration_pb2 import Duration

from .protocol import pb


def _duration(millis: int) -> Duration:
    return Duration(seconds=millis // 1000, nanos=(millis % 1000) * 1_000_000)


@dataclass(frozen=True, slots=True)
class ProducerPolicy:
    """ProxyConfig's producer keys and defaults."""

    maxAttempts: int = 3
    backoffInitialMillis: int = 10
    backoffMaxMillis: int = 1000
    backoffMultiplier: int = 2
    maxBodySize: int = 4 * 1024 * 1024
    validateMessageType: bool = True


def answer(settings: pb.Settings, producer: ProducerPolicy) -> pb.Settings:
    """The settings the server answers a client's with: a producer's completed by ``producer``; a
    consumer's as sent; metrics off (the server collects none from clients)."""
    merged = pb.Settings()
    merged.CopyFrom(settings)
    if settings.HasField("publishing"):
        merged.backoff_policy.CopyFrom(pb.RetryPolicy(
            max_attempts=producer.maxAttempts,
            exponential_backoff=pb.ExponentialBackoff(initial=_duration(producer.backoffInitialMillis),
                                                      max=_duration(producer.backoffMaxMillis),
                                                      multiplier=producer.backoffMultiplier)))
        merged.publishing.max_body_size = producer.maxBodySize
        merged.publishing.validate_message_type = producer.validateMessageType
    merged.metric.CopyFrom(pb.Metric(on=False))
    return merged
