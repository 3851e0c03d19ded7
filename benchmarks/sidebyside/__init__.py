"""Side-by-side benchmark: Apache RocketMQ and FerryMQ on the same machine, driven by the same load tools.

A user moves only if FerryMQ keeps up with the broker they run today, so both brokers are measured in one
run, one after the other, in alternating rounds, with Apache's own benchmark producers (rocketmq-example)
and a small program on the official Java client for what those tools cannot measure (``java/``).

Modules: ``plan`` (sizes and the figures measured), ``javatools`` (building and launching the Java load
tools), ``parse`` (reading their output), ``brokers`` (starting either broker), ``procstat`` (RSS and store
size from /proc and the file system), ``scenarios`` (one measurement each), ``runner`` (rounds and
medians), ``report`` (table, ratios, plot), ``cli`` (command line; ``benchmarks/broker_bench.py`` runs it).
"""
