"""FerryMQ's HTTP gateway: publish to, consume from and administer RocketMQ topics with plain HTTP.

It is a RocketMQ client (:mod:`ferrymq.sdk.aio`) behind a Starlette application, so it serves the same
way inside a FerryMQ broker (``httpListenPort``) and in front of any cluster, Apache RocketMQ included
(``ferrymq gateway http --namesrv ADDR``). Consumers of a group over HTTP are clustering consumers of
that group like any other: they share its queues with Java and Go consumers, commit its offsets and
retry through its retry topic. ``docs/http.md`` is the user's reference; ``/openapi.json`` the
machine's.
"""
