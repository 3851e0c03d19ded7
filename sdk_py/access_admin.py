"""The broker's user and ACL requests (AUTH_CREATE_USER ... AUTH_LIST_ACL), as Apache's ``MQClientAPIImpl``
sends them: the name (username or subject) in the header, the ``UserInfo`` or ``AclInfo`` JSON in the
body. Answers are the broker's JSON, decoded: a dict per user or ACL."""

from __future__ import annotations

import json
from typing import Any

from ferrymq.wire.codes import RequestCode
from ferrymq.wire.command import request
from twisted.internet import defer

from .broker_api import BrokerAPI


def _fields(**values: str | None) -> dict[str, str]:
    """Header fields without the absent ones, as Apache leaves null fields out of the header."""
    return {key: value for key, value in values.items() if value is not None}


def _json(obj: dict[str, Any]) -> bytes:
    return json.dumps({key: value for key, value in obj.items() if value is not None}).encode("utf-8")


def acl_info(subject: str, resources: list[str], actions: list[str], source_ips: list[str] | None,
             decision: str) -> dict[str, Any]:
    """Apache's ``AclInfo.of``: one policy (type left to the broker) with an entry per resource."""
    entries = [{key: value for key, value in (("resource", resource), ("actions", actions),
                                              ("sourceIps", source_ips), ("decision", decision))
                if value is not None} for resource in resources]
    return {"subject": subject, "policies": [{"entries": entries}]}


class AccessAdmin:
    """User and ACL management on one broker at a time, over :class:`BrokerAPI`'s client."""

    def __init__(self, api: BrokerAPI):
        self.api = api

    def _call(self, addr: str, code: RequestCode, fields: dict[str, str], body: bytes = b"") -> defer.Deferred:
        return self.api.call(addr, request(code, fields, body))

    def _decoded(self, addr: str, code: RequestCode, fields: dict[str, str]) -> defer.Deferred:
        return self._call(addr, code, fields).addCallback(lambda resp: json.loads(resp.body) if resp.body else None)

    def create_user(self, addr: str, username: str, password: str, user_type: str | None = None) -> defer.Deferred:
        body = _json({"username": username, "password": password, "userType": user_type})
        return self._call(addr, RequestCode.AUTH_CREATE_USER, _fields(username=username), body)

    def update_user(self, addr: str, username: str, password: str | None = None, user_type: str | None = None,
                    user_status: str | None = None) -> defer.Deferred:
        body = _json({"username": username, "password": password, "userType": user_type,
                      "userStatus": user_status})
        return self._call(addr, RequestCode.AUTH_UPDATE_USER, _fields(username=username), body)

    def delete_user(self, addr: str, username: str) -> defer.Deferred:
        return self._call(addr, RequestCode.AUTH_DELETE_USER, _fields(username=username))

    def get_user(self, addr: str, username: str | None) -> defer.Deferred:
        """Fires with the user's dict (None when the broker answers no body)."""
        return self._decoded(addr, RequestCode.AUTH_GET_USER, _fields(username=username))

    def list_users(self, addr: str, filter: str | None = None) -> defer.Deferred:
        return self._decoded(addr, RequestCode.AUTH_LIST_USER, _fields(filter=filter))

    def create_acl(self, addr: str, acl: dict[str, Any]) -> defer.Deferred:
        return self._call(addr, RequestCode.AUTH_CREATE_ACL, _fields(subject=acl["subject"]), _json(acl))

    def update_acl(self, addr: str, acl: dict[str, Any]) -> defer.Deferred:
        return self._call(addr, RequestCode.AUTH_UPDATE_ACL, _fields(subject=acl["subject"]), _json(acl))

    def delete_acl(self, addr: str, subject: str, resource: str | None = None) -> defer.Deferred:
        return self._call(addr, RequestCode.AUTH_DELETE_ACL, _fields(subject=subject, resource=resource))

    def get_acl(self, addr: str, subject: str | None) -> defer.Deferred:
        return self._decoded(addr, RequestCode.AUTH_GET_ACL, _fields(subject=subject))

    def list_acls(self, addr: str, subject_filter: str | None = None,
                  resource_filter: str | None = None) -> defer.Deferred:
        return self._decoded(addr, RequestCode.AUTH_LIST_ACL,
                             _fields(subjectFilter=subject_filter, resourceFilter=resource_filter))
