"""A gRPC port alone, in a process of its own, serving :class:`PeerService`:
``python -m tests.grpc_service.port_server PLACEMENT MODE FIRST_BYTE_TIMEOUT`` (PLACEMENT: a
``grpcEventLoop``; MODE: a ``tls.server.mode``, test mode's certificate) prints the port it listens on, then
serves until it is terminated. ``BROKER`` runs the port on Twisted's asyncio reactor, as the broker does;
``OWN_THREAD`` on the gRPC thread's loop beside the default reactor."""

from __future__ import annotations

import asyncio
import sys

from rocketmq.grpc_protocol import definition_pb2 as pb
from rocketmq.grpc_protocol import service_pb2 as service
from rocketmq.grpc_protocol import service_pb2_grpc as service_grpc


class PeerService(service_grpc.MessagingServiceServicer):
    """QueryRoute answers the caller's address (the call's ``peer()``) as its status message, after
    :attr:`delay` seconds."""

    delay = 0.0

    async def QueryRoute(self, request, context):
        await asyncio.sleep(self.delay)
        return service.QueryRouteResponse(status=pb.Status(code=pb.OK, message=context.peer()))


def port_tls(mode: str):
    from ferrymq.remoting.tls import ServerTls, TlsMode
    from ferrymq.server.grpc.tls import port_tls

    return port_tls(ServerTls(TlsMode(mode), test_mode=True))


def main(placement: str, mode: str, timeout: float) -> None:
    if placement == "BROKER":
        from ferrymq.server.event_loop import install_reactor

        assert install_reactor(), "the asyncio reactor cannot be installed"
    from twisted.internet import reactor

    from ferrymq.server.grpc.server import GrpcOnReactor, GrpcThread

    server = (GrpcOnReactor if placement == "BROKER" else GrpcThread)(PeerService(), "127.0.0.1", 0, None,
                                                                      port_tls(mode))
    server.factory.timeout = timeout
    server.start()
    print(server.port, flush=True)
    reactor.run()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], float(sys.argv[3]))
