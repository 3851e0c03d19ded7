"""Access control (docs/acl.md): the signature Apache's AclClientRPCHook makes, the users a broker keeps, and
the gate that refuses unsigned or wrongly signed requests with NO_PERMISSION before any processor runs."""

from __future__ import annotations

import json

import pytest

from ferrymq.server.auth.control import AccessControl
from ferrymq.server.auth.errors import AuthenticationError
from ferrymq.server.auth.signature import sign, signed_content, signed_fields
from ferrymq.server.auth.users import User, UserStatus, UserType
from ferrymq.server.config import AuthConfig
from ferrymq.wire.codes import CURRENT_VERSION, RequestCode, ResponseCode
from ferrymq.wire.versions import VERSION_NAMES

C = RequestCode
ROOT = {"username": "rocketmq", "password": "12345678"}


def test_signature_is_apaches_hmac_sha1_in_base64():
    # the vector of Apache's AclSignerTest
    assert sign(b"RocketMQ", "12345678") == "IUc8rrO/0gDch8CjObLQsW2rsiA="


def test_signed_content_is_the_values_sorted_by_key_then_the_body():
    fields = {"topic": "T", "AccessKey": "ak", "Signature": "x", "b": "2", "_UNIQUE_KEY_QUERY": "true"}
    assert signed_content(fields, b"BODY", CURRENT_VERSION) == b"ak" b"true" b"2" b"T" b"BODY"  # '_' < 'b' < 't' 
    # clients up to 4.9.3 added _UNIQUE_KEY_QUERY after signing
    assert signed_content(fields, None, VERSION_NAMES.index("V4_9_3")) == b"ak2T"
    assert signed_content(fields, None, VERSION_NAMES.index("V4_9_4")) == b"aktrue2T"


def access(tmp_path, **keys) -> AccessControl:
    config = AuthConfig(authenticationEnabled=True, initAuthenticationUser=json.dumps(ROOT), **keys)
    return AccessControl(config, str(tmp_path / "config"), "DefaultCluster")


@pytest.fixture
def gated(bk, tmp_path):
    control = access(tmp_path, authenticationWhitelist=str(int(C.GET_BROKER_CONFIG)))
    control.users.create(User("alice", "alice-secret"))
    bk.table = control.guard(bk.table)
    return control


def signed(ext, user="alice", secret="alice-secret", body=b""):
    return signed_fields({k: str(v) for k, v in ext.items()}, body, user, secret, CURRENT_VERSION)


def test_a_request_signed_by_a_user_is_served(bk, gated):
    resp = bk.call(C.GET_TOPIC_CONFIG, signed({"topic": "TBW102"}))
    assert resp.code == ResponseCode.SUCCESS
    # the body is signed too
    body = b'{"consumerGroup":"g","clientId":"c","mqSet":[]}'
    assert bk.call(C.LOCK_BATCH_MQ, signed({}, body=body), body).code == ResponseCode.SUCCESS


@pytest.mark.parametrize(("ext", "remark"), [
    ({"topic": "TBW102"}, "username cannot be null."),
    (signed({"topic": "TBW102"}, user="bob"), "User:bob is not found."),
    (signed({"topic": "TBW102"}, secret="guess"), "check signature failed."),
    ({**signed({"topic": "TBW102"}), "topic": "other"}, "check signature failed."),
    ({k: v for k, v in signed({"topic": "TBW102"}).items() if k != "Signature"}, "check signature failed."),
], ids=["unsigned", "unknown-user", "wrong-secret", "altered-field", "no-signature"])
def test_a_request_not_signed_by_a_user_is_refused_as_apache_refuses_it(bk, gated, ext, remark):
    resp = bk.call(C.GET_TOPIC_CONFIG, ext)
    assert (resp.code, resp.remark) == (ResponseCode.NO_PERMISSION, remark)


def test_a_disabled_user_is_refused_and_a_whitelisted_code_needs_no_signature(bk, gated):
    gated.users.update("alice", user_status=UserStatus.DISABLE)
    resp = bk.call(C.GET_TOPIC_CONFIG, signed({"topic": "TBW102"}))
    assert (resp.code, resp.remark) == (ResponseCode.NO_PERMISSION, "User:alice is disabled.")
    assert bk.call(C.GET_BROKER_CONFIG).code == ResponseCode.SUCCESS


def test_users_persist_and_the_initial_users_are_super_and_never_overwritten(tmp_path):
    control = access(tmp_path, innerClientAuthenticationCredentials='{"accessKey":"inner","secretKey":"s3"}')
    assert control.users.get("rocketmq") == User("rocketmq", "12345678", UserType.SUPER, UserStatus.ENABLE)
    assert control.users.get("inner").is_super
    control.users.update("rocketmq", password="changed")
    control.users.create(User("alice", "pw"))
    with pytest.raises(AuthenticationError, match="The user is existed"):
        control.users.create(User("alice", "other"))
    again = access(tmp_path)
    assert again.users.get("rocketmq").password == "changed"
    assert again.users.get("alice") == User("alice", "pw", UserType.NORMAL, UserStatus.ENABLE)
    assert [u.username for u in again.users.list("i")] == ["alice", "inner"]


def test_a_broker_without_access_control_serves_its_table_itself(bk, tmp_path):
    control = AccessControl(AuthConfig(), str(tmp_path / "config"), "DefaultCluster")
    assert control.guard(bk.table) is bk.table
