"""The generated v2 protocol, imported in one place: ``pb`` (definition.proto) and ``service``
(service.proto and its servicer base). They ship in Apache's ``rocketmq-python-client`` (the ``grpc``
extra); :data:`MISSING` says how to install them when they are absent."""

from __future__ import annotations

MISSING = "the gRPC protocol needs the grpc extra: pip install 'ferrymq[grpc]' (grpcio, rocketmq-python-client)"

try:
    from rocketmq.grpc_protocol import definition_pb2 as pb
    from rocketmq.grpc_protocol import service_pb2 as service
    from rocketmq.grpc_protocol import service_pb2_grpc as service_grpc
except ImportError as exc:  # pragma: no cover - exercised where the extra is not installed
    raise ImportError(MISSING) from exc

Code = pb.Code

__all__ = ["MISSING", "Code", "pb", "service", "service_grpc"]
