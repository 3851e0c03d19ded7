"""Errors the SDK raises for answers that are not what the call needed."""

from __future__ import annotations

from ferrymq.remoting.errors import ResponseCodeError


MQResponseError = ResponseCodeError
