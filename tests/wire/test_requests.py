"""Request declarations: one per code, each naming types that can do the job the declaration gives them."""

from __future__ import annotations

import pytest

from ferrymq.wire.codes import RequestCode
from ferrymq.wire.errors import MissingField
from ferrymq.wire.requests import REQUESTS, Request


@pytest.mark.parametrize("spec", REQUESTS.values(), ids=lambda r: RequestCode(r.code).name)
def test_each_declaration_names_codecs_for_its_parts(spec: Request):
    assert RequestCode(spec.code) == spec.code
    if spec.header is not None:
        assert hasattr(spec.header, "from_ext") and hasattr(spec.header, "to_ext")
    if spec.response is not None:
        assert hasattr(spec.response, "from_ext")
    if spec.body is not None:
        assert callable(getattr(spec.body, "decode", None))


def test_decode_uses_the_codes_key_form():
    long = REQUESTS[RequestCode.SEND_MESSAGE]
    short = REQUESTS[RequestCode.SEND_MESSAGE_V2]
    ext = {"a": "pg", "b": "T", "c": "TBW102", "d": "4", "e": "0", "f": "0", "g": "1", "h": "0"}
    assert short.decode(ext).topic == "T"
    with pytest.raises(MissingField):
        long.decode(ext)
    assert long.decode(long.encode(short.decode(ext))) == short.decode(ext)


def test_a_code_without_fields_decodes_to_none():
    assert REQUESTS[RequestCode.GET_BROKER_RUNTIME_INFO].decode({"anything": "x"}) is None
