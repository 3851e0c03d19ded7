"""The keys of Apache's proxy (its ProxyConfig) that FerryMQ's gRPC service reads, with the proxy's names and
defaults, from the broker's config file: what a client is told in its Telemetry settings (the producer's
send retries, the consumer's receive batch and long polling), how long received messages stay invisible,
and how messages received with ``auto_renew`` are renewed.

This module imports no gRPC, so ``ferrymq --help`` and the check of a config file know the keys whether or
not the ``grpc`` extra is installed.
"""

from __future__ import annotations

from dataclasses import dataclass

from ferrymq.server.config_keys import key, positive


@dataclass(frozen=True, slots=True)
class ProducerPolicy:
    """What a producer's settings are answered with."""

    grpcClientProducerMaxAttempts: int = key(3, "Attempts a gRPC producer makes at each send (told in its "
                                                "Telemetry settings).", check=positive)
    grpcClientProducerBackoffInitialMillis: int = key(10, "A gRPC producer's first backoff between attempts, in "
                                                          "milliseconds.", check=positive)
    grpcClientProducerBackoffMaxMillis: int = key(1000, "A gRPC producer's longest backoff between attempts, in "
                                                        "milliseconds.", check=positive)
    grpcClientProducerBackoffMultiplier: int = key(2, "The factor each backoff of a gRPC producer grows by.",
                                                   check=positive)
    enableTopicMessageTypeCheck: bool = key(True, "Tell gRPC producers to check a message's type against its "
                                                  "topic's before sending (the server checks it all the same).")


@dataclass(frozen=True, slots=True)
class ConsumerPolicy:
    """What a consumer's settings are answered with, and the bounds of its receives."""

    grpcClientConsumerMinLongPollingTimeoutMillis: int = key(5_000, "The shortest a gRPC receive long-polls, in "
                                                                    "milliseconds.", check=positive)
    grpcClientConsumerMaxLongPollingTimeoutMillis: int = key(20_000, "The longest a gRPC receive long-polls, in "
                                                                     "milliseconds (told in a consumer's settings).",
                                                             check=positive)
    grpcClientConsumerLongPollingBatchSize: int = key(32, "Messages a gRPC consumer receives at most at once (told "
                                                          "in its settings).", check=positive)
    defaultInvisibleTimeMills: int = key(60_000, "Milliseconds a message received with auto_renew (the "
                                                 "PushConsumer's) is invisible before its first renewal.",
                                         check=positive)
    minInvisibleTimeMillsForRecv: int = key(10_000, "The shortest invisible duration a gRPC receive may ask for, "
                                                    "in milliseconds.", check=positive)
    maxInvisibleTimeMills: int = key(12 * 3600 * 1000, "The longest invisible duration a gRPC receive or change "
                                                       "of invisibility may ask for, in milliseconds.",
                                     check=positive)


@dataclass(frozen=True, slots=True)
class RenewalPolicy:
    """How the messages a client received with ``auto_renew`` are kept invisible for it (:mod:`.renewals`)."""

    renewSchedulePeriodMillis: int = key(5_000, "Milliseconds between two looks at the messages received with "
                                                "auto_renew.", check=positive)
    renewAheadTimeMillis: int = key(10_000, "A message received with auto_renew is renewed this many milliseconds "
                                            "before it would be visible again.", check=positive)
    renewMaxTimeMillis: int = key(3 * 3600 * 1000, "Milliseconds after its receive a message received with "
                                                   "auto_renew is handed back for redelivery.", check=positive)
    invisibleTimeMillisWhenClear: int = key(1_000, "Milliseconds after its client is gone a message it received "
                                                   "with auto_renew is visible again.", check=positive)


#: every key class of this module, for the config file's checks and ``--help``
KEY_CLASSES = (ProducerPolicy, ConsumerPolicy, RenewalPolicy)
