"""Options and offsets JSON, checked before the cluster is asked anything."""

from __future__ import annotations

import pytest

from ferrymq.pipeline.options import OptionError, read_options, write_options
from ferrymq.pipeline.queues import EARLIEST, LATEST, QueueRef, offsets_from_json, offsets_to_json

NS = {"nameServer": "127.0.0.1:9876"}


def test_offsets_json_round_trips_in_rocketmq_spark_shape():
    offsets = {QueueRef("T", "broker-a", 1): 7, QueueRef("T", "broker-a", 0): EARLIEST, QueueRef("U", "b", 3): LATEST}
    text = offsets_to_json(offsets)
    assert text == '{"T":{"broker-a":{"0":-2,"1":7}},"U":{"b":{"3":-1}}}'
    assert offsets_from_json(text) == offsets


def test_options_are_case_insensitive_and_typed():
    opts = read_options({"NAMESERVER": "ns:1", "topic": "A, B", "startingoffsets": "latest",
                         "pullBatchSize": "8", "subExpression": "TagA || TagB"})
    assert opts.name_server == "ns:1" and opts.topics == ("A", "B")
    assert opts.starting.default == LATEST and opts.ending.default == LATEST
    assert (opts.expression, opts.expression_type, opts.pull_batch_size) == ("TagA || TagB", "TAG", 8)
    sql = read_options({**NS, "topic": "A", "sql92": "a > 1", "startingTimestamp": "1700000000000"})
    assert (sql.expression, sql.expression_type, sql.starting.timestamp_ms) == ("a > 1", "SQL92", 1700000000000)


@pytest.mark.parametrize("options, option, words", [
    ({"topic": "T"}, "nameServer", "required"),
    ({**NS}, "topic", "give topic"),
    ({**NS, "topic": "T", "startingOffsets": '{"T": {"broker-a": {"0": "x"}}}'}, "startingOffsets", "not an offset"),
    ({**NS, "topic": "T", "startingOffsets": "{bad"}, "startingOffsets", "malformed offsets JSON"),
    ({**NS, "topic": "T", "startingOffsets": "first"}, "startingOffsets", "not 'earliest', 'latest'"),
    ({**NS, "topic": "T", "endingOffsets": "earliest"}, "endingOffsets", "cannot end a range"),
    ({**NS, "topic": "T", "startingOffsets": "latest", "startingTimestamp": "1"}, "startingOffsets", "not both"),
    ({**NS, "topic": "T", "startingTimestamp": "yesterday"}, "startingTimestamp", "milliseconds"),
    ({**NS, "topic": "T", "subExpression": "A", "sql92": "a > 1"}, "sql92", "not both"),
    ({**NS, "topic": "T", "pullBatchSize": "0"}, "pullBatchSize", "positive"),
    ({**NS, "topicPattern": "("}, "topicPattern", "regular expression"),
    ({**NS, "topic": "T", "startOffsets": "earliest"}, "startoffsets", "not an option"),
])
def test_a_bad_read_option_is_an_error_naming_it(options, option, words):
    with pytest.raises(OptionError, match=words) as caught:
        read_options(options)
    assert caught.value.option == option
    assert str(caught.value).startswith(f"rocketmq option {option}: ")


def test_write_options():
    opts = write_options({**NS, "topic": "T", "sendBatchSize": "16", "producerGroup": "pg"})
    assert (opts.topic, opts.batch_size, opts.producer_group) == ("T", 16, "pg")
    with pytest.raises(OptionError, match="nameServer"):
        write_options({"topic": "T"})
