"""SQL92 selectors: Apache's grammar, its compile-time refusals, and its type and null semantics."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ferrymq.server.sql92 import EvaluationError, FilterSyntaxError, JLong, compile_expression


def matches(expr: str, **props: str) -> bool:
    return compile_expression(expr).matches(props)


def value(expr: str, **props: str):
    return compile_expression(expr).evaluate(props)


# --- the reference's worked examples ---------------------------------------------------------


@pytest.mark.parametrize(
    "props, expected",
    [({"a": "2"}, True), ({"a": "5"}, False), ({}, False), ({"a": "x"}, False), ({"a": "0"}, True), ({"a": "3"}, True)],
)
def test_between(props, expected):
    assert matches("a BETWEEN 0 AND 3", **props) is expected


def test_in_and_int_constant_refuses_decimal_strings():
    expr = "TAGS IN ('TagA','TagB') AND price > 100"
    assert matches(expr, TAGS="TagA", price="150")
    assert not matches(expr, TAGS="TagA", price="100.5")  # "100.5" is not an Integer
    assert matches("TAGS IN ('TagA','TagB') AND price > 100.0", TAGS="TagA", price="100.5")
    assert not matches(expr, TAGS="TagC", price="150")


def test_boolean_constant_converts_the_property_string():
    assert matches("region = 'hz' OR vip = TRUE", region="sh", vip="true")
    assert matches("vip = TRUE", vip="TRUE")
    assert not matches("vip = TRUE", vip="yes")
    assert matches("vip = FALSE", vip="yes")  # Boolean.valueOf("yes") is false
    with pytest.raises(EvaluationError):  # constant on the left: Apache fails the cast
        value("TRUE = vip", vip="true")


def test_null_semantics():
    assert matches("name IS NULL")
    assert not matches("name IS NULL", name="x")
    assert matches("name IS NOT NULL", name="")
    assert value("a <> 'x'") is None and not matches("a <> 'x'")
    assert value("a = 'x'") is None
    assert value("a > 1") is None
    assert value("a") is None
    assert value("a", a="true") is False  # a property string is never a boolean
    assert value("NOT a") is None


def test_three_valued_logic():
    assert value("a = '1' AND b = '2'", a="1") is None
    assert value("a = '1' AND b = '2'", a="0") is False
    assert value("a = '1' OR b = '2'", a="1") is True
    assert value("a = '1' OR b = '2'", a="0") is None
    assert value("NOT (a = '1')", a="0") is True


def test_integer_parsing_is_javas():
    assert matches("a = 5", a="05")
    assert matches("a = 5", a="+5")
    assert not matches("a = 5", a=" 5")  # Integer.valueOf does not trim
    assert not matches("a = 5", a="5000000000")  # out of int range: error, no match
    assert matches("a = 5000000000", a="5000000000")  # a long constant parses longs
    assert matches("a >= -2147483648", a="-2147483648")
    assert matches("a > 1.5", a=" 2 ")  # Double.valueOf trims
    assert matches("a < 1e3", a="999d")


def test_comparisons_between_two_properties_use_doubles():
    assert matches("a > b", a="10", b="9.5")
    assert not matches("a > b", a="x", b="1")  # not numbers: error
    assert matches("a = b", a="x", b="x")
    assert not matches("a = b", a="1", b="1.0")  # two strings compare as strings for '='


def test_string_predicates():
    assert matches("s CONTAINS 'ell'", s="hello")
    assert matches("s STARTSWITH 'he'", s="hello") and matches("s ENDSWITH 'lo'", s="hello")
    assert matches("s NOT CONTAINS 'z'", s="hello")
    assert not matches("s NOT CONTAINS 'z'")  # missing property: FALSE, not NULL
    assert not matches("s CONTAINS ''", s="hello")
    assert not matches("s NOT STARTSWITH ''", s="hello")
    assert matches("s not endswith 'x'", s="hello")


def test_in_not_in():
    assert matches("c IN ('a', 'b''c')", c="b'c")
    assert matches("c NOT IN ('a')", c="b")
    assert value("c NOT IN ('a')") is None
    assert not matches("c NOT IN ('a', 'b')", c="b")


def test_not_between_and_unary():
    assert matches("a NOT BETWEEN 1 AND 3", a="4") and not matches("a NOT BETWEEN 1 AND 3", a="2")
    assert matches("a = -5", a="-5") and matches("a > -1.5", a="-1")
    assert matches("a = +5", a="5")
    assert value("-a = 5", a="-5") is None  # negating a property string gives NULL


def test_not_binds_to_the_next_primary():
    # (NOT a) = 1: NOT of a property string is FALSE, FALSE = 1 is never true
    assert not matches("NOT a = 1", a="2")
    assert matches("NOT (a = 1)", a="2")


def test_keywords_are_case_insensitive_and_identifiers_case_sensitive():
    assert matches("a between 1 and 3 or B is null", a="9")
    assert not matches("A = '1'", a="1")


def test_comments_and_trailing_input_after_a_complete_expression():
    assert matches("a = '1' -- trailing comment\n", a="1")
    assert matches("/* lead */ a = '1'", a="1")
    assert matches("a = '1' garbage after", a="1")  # Apache never reads past the next token


@pytest.mark.parametrize(
    "expr",
    [
        "a > 0.0",  # a zero float literal is refused
        "a > 'x'",
        "a > TRUE",
        "a = NULL",
        "NULL <> a",
        "TRUE = 'x'",
        "a BETWEEN 3 AND 1",
        "a BETWEEN NULL AND 1",
        "'x' IN ('a')",
        "a IN (1, 2)",
        "a IN ()",
        "5",
        "'text'",
        "a = ",
        "(a = 1",
        "a ! 1",
        "",
        "   ",
        "a > 99999999999999999999",
        "a > 1e400",
        "(a = 1) > 2",
    ],
)
def test_invalid_expressions_are_refused(expr):
    with pytest.raises(FilterSyntaxError):
        compile_expression(expr)


def test_literal_types():
    assert value("a = 5", a="5") is True
    assert compile_expression("x = 2147483648").evaluate({"x": "2147483648"}) is True
    assert repr(JLong(3)) == "3L"


props = st.dictionaries(st.sampled_from(["a", "b", "c"]), st.sampled_from(["1", "2", "x", "true", "-3", "2.5"]))


@given(props)
def test_not_is_the_complement_when_known(p):
    for expr in ["a = '1'", "b > 1", "c IN ('x','1')", "a BETWEEN 1 AND 2"]:
        try:
            v = compile_expression(expr).evaluate(p)
            n = compile_expression(f"NOT ({expr})").evaluate(p)
        except EvaluationError:
            continue
        if v is None:
            assert n is None
        else:
            assert n is (not v)
