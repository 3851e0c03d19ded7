"""The RocketMQ 5 gRPC protocol (``apache.rocketmq.v2.MessagingService``), served by a broker process.

Apache serves it from its proxy; FerryMQ serves it beside the remoting port (``grpcListenPort``), on the
broker's own store, so the rocketmq-clients SDKs and the remoting clients share topics and messages.
The messages and the service stubs are the ones Apache generates from its published protocol (the
``grpc`` extra: h2, grpcio and ``rocketmq-python-client``); see docs/grpc.md.
"""
