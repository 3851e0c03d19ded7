"""SQL92 property selectors, with the grammar, types and null logic of Apache RocketMQ's filter module.

A consumer subscribes with an expression over message properties (``a > 5 AND TAGS IN ('x')``);
the broker compiles it once per subscription version and evaluates it for each candidate message
at pull time. The parser is a recursive-descent mirror of Apache's JavaCC grammar rather than a
generated one because Apache's quirks are part of the contract: keywords are case-insensitive,
``NOT`` binds to the next primary, IN lists take only string literals, and input left over after a
complete expression is read lazily and ignored (only its first token must lex).

Values follow Java's types: property values are ``str``; literals are ``int`` (Java Integer),
:class:`JLong`, ``float`` (Double), ``bool``, ``str`` or None. A comparison between a property
string and a typed constant parses the string as the constant's type; a string that does not parse
is an evaluation error and the message does not match. The result of an expression is True, False
or None (unknown); only True matches.
"""

from __future__ import annotations

import math
import re
import struct
from dataclasses import dataclass
from typing import Callable, Mapping

__all__ = ["FilterSyntaxError", "JLong", "compile_expression", "Selector"]


class FilterSyntaxError(ValueError):
    """The expression is not one Apache RocketMQ would accept; the message says why and where."""


class EvaluationError(Exception):
    """A message's properties could not be evaluated (e.g. 'abc' compared with 5): no match."""


class JLong(int):
    """A Java ``Long`` value: decides how a property string is parsed when compared with it."""

    __slots__ = ()

    def __neg__(self) -> "JLong":
        return JLong(-int(self))

    def __repr__(self) -> str:
        return f"{int(self)}L"


INT_MIN, INT_MAX = -(2**31), 2**31 - 1
LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1
DOUBLE_MAX = 1.7976931348623157e308
DOUBLE_MIN_POSITIVE = 5e-324

# ---------------------------------------------------------------------------------------- Java parsing

_JAVA_INTEGER = re.compile(r"[+-]?[0-9]+\Z")
_JAVA_DOUBLE = re.compile(
    r"[+-]?(NaN|Infinity|((\d+\.?\d*|\.\d+)([eE][+-]?\d+)?)[fFdD]?)\Z"
)


def java_int(text: str) -> int:
    """Integer.valueOf: sign and ASCII digits, 32-bit range, no surrounding blanks."""
    if _JAVA_INTEGER.match(text):
        value = int(text)
        if INT_MIN <= value <= INT_MAX:
            return value
    raise EvaluationError(f"For input string: {text!r} (not an int)")


def java_long(text: str) -> JLong:
    if _JAVA_INTEGER.match(text):
        value = int(text)
        if LONG_MIN <= value <= LONG_MAX:
            return JLong(value)
    raise EvaluationError(f"For input string: {text!r} (not a long)")


def java_double(text: str) -> float:
    """Double.valueOf: trims control characters and blanks, accepts NaN, Infinity and an f/d suffix."""
    trimmed = text.strip("".join(chr(c) for c in range(33)))
    match = _JAVA_DOUBLE.match(trimmed)
    if not match:
        raise EvaluationError(f"For input string: {text!r} (not a double)")
    body = trimmed.rstrip("fFdD") if trimmed[-1:] in "fFdD" and "Infinity" not in trimmed else trimmed
    return float(body.replace("Infinity", "inf").replace("NaN", "nan"))


def java_boolean(text: str) -> bool:
    return text.lower() == "true"


def _double_bits(value: float) -> int:
    return struct.unpack(">q", struct.pack(">d", value))[0]


def _cmp(a, b) -> int:
    """compareTo of two values of one Java type (Double.compare for floats: NaN largest, -0.0 < 0.0)."""
    if type(a) is float:
        if a < b:
            return -1
        if a > b:
            return 1
        if a == b and a != 0.0:
            return 0
        ba, bb = _double_bits(a) if not math.isnan(a) else 0x7FF8000000000000, (
            _double_bits(b) if not math.isnan(b) else 0x7FF8000000000000
        )
        return (ba > bb) - (ba < bb)
    return (a > b) - (a < b)


def _kind(value) -> str:
    t = type(value)
    if t is bool:
        return "bool"
    if t is int:
        return "int"
    if t is JLong:
        return "long"
    if t is float:
        return "double"
    if t is str:
        return "str"
    return "other"


_PARSE_AS = {"int": java_int, "long": java_long, "double": java_double, "bool": java_boolean}
_RANK = {"int": 0, "long": 1, "double": 2}


def java_compare(lv, rv) -> int:
    """Apache's comparison with string conversion on: unlike types are brought together or ordered 'less'."""
    lk, rk = _kind(lv), _kind(rv)
    if lk != rk:
        if lk == "bool":
            if rk == "str":  # Apache casts the Boolean to String here and fails
                raise EvaluationError("cannot compare a boolean constant with a string")
            return -1
        if lk in _RANK:
            if rk in _RANK:
                if _RANK[lk] < _RANK[rk]:
                    lv = float(lv) if rk == "double" else JLong(lv)
                else:
                    rv = float(rv) if lk == "double" else JLong(rv)
            elif rk == "str":
                rv = _PARSE_AS[lk](rv)
            else:
                return -1
        elif lk == "str" and rk in _PARSE_AS:
            lv = _PARSE_AS[rk](lv)
        else:
            return -1
    return _cmp(lv, rv)


# ---------------------------------------------------------------------------------------- tokens

_TOKEN = re.compile(
    r"""
    (?P<ws>[ \t\n\r\f]+|--[^\n\r]*(\r\n|\n|\r)|/\*[^*]*\*+([^*/][^*]*\*+)*/)
  | (?P<float>([0-9]+\.[0-9]*([eE][+-]?[0-9]+)?|\.[0-9]+([eE][+-]?[0-9]+)?|[0-9]+[eE][+-]?[0-9]+))
  | (?P<decimal>(0|[1-9][0-9]*)[lL]?)
  | (?P<string>'([^']|'')*')
  | (?P<id>[a-zA-Z_$][a-zA-Z0-9_$]*)
  | (?P<op><>|>=|<=|[=<>(),+-])
    """,
    re.VERBOSE,
)
_KEYWORDS = {"NOT", "AND", "OR", "BETWEEN", "IN", "TRUE", "FALSE", "NULL", "IS", "CONTAINS", "STARTSWITH", "ENDSWITH"}


@dataclass(slots=True)
class _Token:
    kind: str  # keyword name, 'id', 'decimal', 'float', 'string', an operator, or 'EOF'
    text: str
    pos: int


class _Lexer:
    """Lazy: a token is only read when the parser looks at it, as JavaCC does."""

    def __init__(self, text: str):
        self.text = text
        self.pos = 0
        self.buffer: list[_Token] = []

    def _read(self) -> _Token:
        text = self.text
        while True:
            if self.pos >= len(text):
                return _Token("EOF", "", self.pos)
            match = _TOKEN.match(text, self.pos)
            if not match:
                raise FilterSyntaxError(f"unexpected character {text[self.pos]!r} at position {self.pos + 1}")
            start, self.pos = self.pos, match.end()
            kind = match.lastgroup
            if kind == "ws":
                continue
            value = match.group()
            if kind == "id" and value.upper() in _KEYWORDS:
                return _Token(value.upper(), value, start)
            if kind == "op":
                return _Token(value, value, start)
            return _Token(kind, value, start)

    def peek(self, n: int = 0) -> _Token:
        while len(self.buffer) <= n:
            self.buffer.append(self._read())
        return self.buffer[n]

    def next(self) -> _Token:
        token = self.peek()
        self.buffer.pop(0)
        return token


# ---------------------------------------------------------------------------------------- expressions
# Each node is (evaluate, info): evaluate(props) -> value; info says what the parser may check.

Props = Mapping[str, str]
Eval = Callable[[Props], object]


@dataclass(slots=True)
class _Node:
    evaluate: Eval
    kind: str  # 'const', 'prop', 'bool' (a boolean expression), 'value' (other computed value)
    value: object = None  # the constant, for kind == 'const'
    name: str = ""  # the property, for kind == 'prop'

    @property
    def is_boolean(self) -> bool:
        return self.kind == "bool" or (self.kind == "const" and (self.value is None or type(self.value) is bool))


def _const(value) -> _Node:
    return _Node(lambda props: value, "const", value)


def _prop(name: str) -> _Node:
    return _Node(lambda props: props.get(name), "prop", name=name)


def _as_boolean(node: _Node) -> _Node:
    if node.is_boolean:
        return node
    if node.kind == "prop":
        get = node.evaluate

        def cast(props):
            value = get(props)
            if value is None:
                return None
            return value if type(value) is bool else False

        return _Node(cast, "bool")
    raise FilterSyntaxError(f"expression will not result in a boolean value: {_describe(node)}")


def _describe(node: _Node) -> str:
    if node.kind == "const":
        return repr(node.value)
    if node.kind == "prop":
        return node.name
    return "expression"


def _and(a: _Node, b: _Node) -> _Node:
    left, right = a.evaluate, b.evaluate

    def evaluate(props):
        lv = left(props)
        if lv is False:
            return False
        rv = right(props)
        if rv is False:
            return False
        if lv is None or rv is None:
            return None
        return True

    return _Node(evaluate, "bool")


def _or(a: _Node, b: _Node) -> _Node:
    left, right = a.evaluate, b.evaluate

    def evaluate(props):
        lv = left(props)
        if lv is True:
            return True
        rv = right(props)
        if rv is True:
            return True
        if lv is None or rv is None:
            return None
        return False

    return _Node(evaluate, "bool")


def _not(a: _Node) -> _Node:
    inner = a.evaluate

    def evaluate(props):
        value = inner(props)
        if value is None:
            return None
        return not value

    return _Node(evaluate, "bool")


def _equal(a: _Node, b: _Node) -> _Node:
    left, right = a.evaluate, b.evaluate

    def evaluate(props):
        lv = left(props)
        rv = right(props)
        if lv is None or rv is None:
            if lv is None and rv is None:
                return True
            return None if lv is None else False
        if lv.__class__ is rv.__class__:
            return _cmp(lv, rv) == 0 if type(lv) is float else lv == rv
        return java_compare(lv, rv) == 0

    return _Node(evaluate, "bool")


def _check_equal_operands(a: _Node, b: _Node) -> None:
    for node in (a, b):
        if node.kind == "const" and node.value is None:
            raise FilterSyntaxError("NULL cannot be compared with '=' or '<>'; use IS NULL / IS NOT NULL")
    if a.kind == "const" and b.kind == "const" and type(a.value) is bool and type(b.value) is not bool:
        raise FilterSyntaxError(f"{a.value!r} cannot be compared with {b.value!r}")


def _check_ordered_operand(node: _Node, op: str) -> None:
    if node.kind == "const" and (type(node.value) is bool or not isinstance(node.value, (int, float))):
        raise FilterSyntaxError(f"value {_describe(node)} cannot be compared with '{op}': only numbers can")
    if node.is_boolean:
        raise FilterSyntaxError(f"a boolean expression cannot be compared with '{op}'")


_ORDER = {">": lambda c: c > 0, ">=": lambda c: c >= 0, "<": lambda c: c < 0, "<=": lambda c: c <= 0}


def _ordered(op: str, a: _Node, b: _Node) -> _Node:
    _check_ordered_operand(a, op)
    _check_ordered_operand(b, op)
    left, right, test = a.evaluate, b.evaluate, _ORDER[op]

    def evaluate(props):
        lv = left(props)
        if lv is None:
            return None
        rv = right(props)
        if rv is None:
            return None
        if type(lv) is str and type(rv) is str:
            return test(_cmp(java_double(lv), java_double(rv)))
        return test(java_compare(lv, rv))

    return _Node(evaluate, "bool")


def _string_test(a: _Node, search: str, test: Callable[[str, str], bool], negate: bool) -> _Node:
    inner = a.evaluate

    def evaluate(props):
        if not search:
            return False
        value = inner(props)
        if type(value) is not str:
            return False
        return test(value, search) is not negate

    return _Node(evaluate, "bool")


def _in(a: _Node, items: list[str], negate: bool) -> _Node:
    if a.kind != "prop":
        raise FilterSyntaxError(f"IN needs a property on its left, got {_describe(a)}")
    name, members = a.name, frozenset(items)

    def evaluate(props):
        value = props.get(name)
        if value is None or type(value) is not str:
            return None
        return (value in members) is not negate

    return _Node(evaluate, "bool")


def _negate(a: _Node) -> _Node:
    inner = a.evaluate

    def evaluate(props):
        value = inner(props)
        if type(value) in (int, JLong, float):
            return -value
        return None

    if a.kind == "const" and type(a.value) in (int, JLong, float):
        return _const(-a.value)
    return _Node(evaluate, "value")


# ---------------------------------------------------------------------------------------- parser


class _Parser:
    def __init__(self, text: str):
        self.lexer = _Lexer(text)

    def _expect(self, kind: str) -> _Token:
        token = self.lexer.next()
        if token.kind != kind:
            found = "end of expression" if token.kind == "EOF" else repr(token.text)
            raise FilterSyntaxError(f"expected {kind!r} at position {token.pos + 1}, found {found}")
        return token

    def _at(self, kind: str, offset: int = 0) -> bool:
        return self.lexer.peek(offset).kind == kind

    def selector(self) -> _Node:
        node = _as_boolean(self.or_expr())
        self.lexer.peek()  # the next token must lex; anything after it is never read (as Apache)
        return node

    def or_expr(self) -> _Node:
        left = self.and_expr()
        while self._at("OR"):
            self.lexer.next()
            left = _or(_as_boolean(left), _as_boolean(self.and_expr()))
        return left

    def and_expr(self) -> _Node:
        left = self.equality()
        while self._at("AND"):
            self.lexer.next()
            left = _and(_as_boolean(left), _as_boolean(self.equality()))
        return left

    def equality(self) -> _Node:
        left = self.comparison()
        while True:
            if self._at("="):
                self.lexer.next()
                right = self.comparison()
                _check_equal_operands(left, right)
                left = _equal(left, right)
            elif self._at("<>"):
                self.lexer.next()
                right = self.comparison()
                _check_equal_operands(left, right)
                left = _not(_equal(left, right))
            elif self._at("IS") and self._at("NULL", 1):
                self.lexer.next(), self.lexer.next()
                left = _equal(left, _const(None))
            elif self._at("IS"):
                self.lexer.next()
                self._expect("NOT")
                self._expect("NULL")
                left = _not(_equal(left, _const(None)))
            else:
                return left

    def _string_literal(self) -> str:
        return self._expect("string").text[1:-1].replace("''", "'")

    def _string_list(self) -> list[str]:
        self._expect("(")
        items = [self._string_literal()]
        while self._at(","):
            self.lexer.next()
            items.append(self._string_literal())
        self._expect(")")
        return items

    def comparison(self) -> _Node:
        left = self.unary()
        string_ops = {"CONTAINS": str.__contains__, "STARTSWITH": str.startswith, "ENDSWITH": str.endswith}
        while True:
            kind = self.lexer.peek().kind
            negate = kind == "NOT" and self.lexer.peek(1).kind in ("CONTAINS", "STARTSWITH", "ENDSWITH", "BETWEEN", "IN")
            if negate:
                self.lexer.next()
                kind = self.lexer.peek().kind
            if kind in _ORDER and not negate:
                self.lexer.next()
                left = _ordered(kind, left, self.unary())
            elif kind in string_ops:
                self.lexer.next()
                left = _string_test(left, self._string_literal(), string_ops[kind], negate)
            elif kind == "BETWEEN":
                self.lexer.next()
                low = self.unary()
                self._expect("AND")
                high = self.unary()
                left = self._between(left, low, high, negate)
            elif kind == "IN":
                self.lexer.next()
                left = _in(left, self._string_list(), negate)
            else:
                return left

    def _between(self, value: _Node, low: _Node, high: _Node, negate: bool) -> _Node:
        if negate:
            return _or(_ordered("<", value, low), _ordered(">", value, high))
        if low.kind == "const" and high.kind == "const":
            if low.value is None or high.value is None:
                raise FilterSyntaxError("illegal values of BETWEEN: bounds cannot be NULL")
            try:
                order = java_compare(high.value, low.value)
            except EvaluationError as exc:
                raise FilterSyntaxError(f"illegal values of BETWEEN: {exc}") from None
            if order < 0:
                raise FilterSyntaxError(
                    f"illegal values of BETWEEN: low value {low.value!r} must be less than or equal to high value {high.value!r}"
                )
        return _and(_ordered(">=", value, low), _ordered("<=", value, high))

    def unary(self) -> _Node:
        token = self.lexer.peek()
        if token.kind == "+":
            self.lexer.next()
            return self.unary()
        if token.kind == "-":
            self.lexer.next()
            return _negate(self.unary())
        if token.kind == "NOT":
            self.lexer.next()
            return _not(_as_boolean(self.unary()))
        return self.primary()

    def primary(self) -> _Node:
        token = self.lexer.next()
        kind = token.kind
        if kind == "(":
            node = self.or_expr()
            self._expect(")")
            return node
        if kind == "string":
            return _const(token.text[1:-1].replace("''", "'"))
        if kind == "decimal":
            digits = token.text.rstrip("lL")
            value = int(digits)
            if value > LONG_MAX:
                raise FilterSyntaxError(f"number {token.text} at position {token.pos + 1} is out of the long range")
            return _const(value if value <= INT_MAX else JLong(value))
        if kind == "float":
            value = float(token.text)
            if value > DOUBLE_MAX:
                raise FilterSyntaxError(f"{token.text} is greater than the largest double")
            if value < DOUBLE_MIN_POSITIVE:
                raise FilterSyntaxError(f"{token.text} is less than the smallest positive double (0.0 is not allowed)")
            return _const(value)
        if kind in ("TRUE", "FALSE"):
            return _const(kind == "TRUE")
        if kind == "NULL":
            return _const(None)
        if kind == "id":
            return _prop(token.text)
        found = "end of expression" if kind == "EOF" else repr(token.text)
        raise FilterSyntaxError(f"unexpected {found} at position {token.pos + 1}")


@dataclass(frozen=True, slots=True)
class Selector:
    """A compiled expression: ``selector.matches(properties)`` is True only when it evaluates to TRUE."""

    expression: str
    _evaluate: Eval

    def evaluate(self, properties: Props) -> object:
        """True, False or None; raises EvaluationError when a value cannot be converted."""
        return self._evaluate(properties)

    def matches(self, properties: Props) -> bool:
        try:
            return self._evaluate(properties) is True
        except (EvaluationError, ValueError, OverflowError):
            return False


def compile_expression(expression: str) -> Selector:
    """Parse and compile; FilterSyntaxError names what is wrong (sent to the client as the remark)."""
    if expression is None or not expression.strip():
        raise FilterSyntaxError("the SQL92 expression is empty")
    try:
        node = _Parser(expression).selector()
    except RecursionError:
        raise FilterSyntaxError("the SQL92 expression is nested too deeply") from None
    return Selector(expression, node.evaluate)
