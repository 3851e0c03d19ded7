"""Subscription expressions and the client-side tag re-check."""

from __future__ import annotations

import pytest

from ferrymq.sdk.consumer.subscription import build_subscription, matches
from ferrymq.wire.message import MessageExt


def msg(tags: str | None) -> MessageExt:
    return MessageExt("T", b"x", properties={"TAGS": tags} if tags else {})


def test_tag_expression_is_split_trimmed_and_hashed_like_java():
    sub = build_subscription("T", " TagA ||TagB|| TagA ", sub_version=5)
    assert sub.tags_set == ["TagA", "TagB"]
    assert sub.code_set == [2598919, 2598920]  # Java "TagA".hashCode(), "TagB".hashCode()
    assert sub.expression_type == "TAG" and sub.sub_version == 5


@pytest.mark.parametrize("expr", [None, "", "  ", "*"])
def test_everything(expr):
    sub = build_subscription("T", expr)
    assert sub.sub_string == "*" and sub.tags_set == [] and sub.code_set == []
    assert matches(sub, msg(None)) and matches(sub, msg("Any"))


def test_sql92_passes_through_unfiltered():
    sub = build_subscription("T", "a > 5 AND b = 'x'", "sql92")
    assert sub.expression_type == "SQL92" and sub.sub_string == "a > 5 AND b = 'x'" and not sub.tags_set
    assert matches(sub, msg("whatever"))


def test_client_recheck_drops_hash_collisions_and_untagged():
    sub = build_subscription("T", "TagA || TagB")
    assert matches(sub, msg("TagA")) and matches(sub, msg("TagB"))
    assert not matches(sub, msg("TagC")) and not matches(sub, msg(None))
    # "Aa" and "BB" share a Java hash code: the broker cannot tell them apart, the client must
    assert build_subscription("T", "Aa").code_set == build_subscription("T", "BB").code_set
    assert not matches(build_subscription("T", "Aa"), msg("BB"))


def test_bad_expressions_are_rejected():
    with pytest.raises(ValueError, match="names no tag"):
        build_subscription("T", "||")
    with pytest.raises(ValueError, match="neither TAG nor SQL92"):
        build_subscription("T", "x", "XPATH")
    with pytest.raises(ValueError, match="needs an expression"):
        build_subscription("T", " ", "SQL92")
