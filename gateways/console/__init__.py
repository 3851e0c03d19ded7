"""FerryMQ's web console: the cluster, its topics, groups, messages and HTTP transactions as HTML pages
served under ``/console`` on the HTTP listener (``consoleEnabled``; docs/console.md).

It reads everything through the RocketMQ admin protocol (:class:`ferrymq.sdk.aio.MQAdmin`), as
rocketmq-dashboard does, so it shows any cluster: the broker's own when a broker serves it, and the
cluster a gateway stands in front of (``ferrymq gateway http -n ADDR``). Pages are rendered on the
server, with one stylesheet and no script.
"""
