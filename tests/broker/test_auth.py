"""Access control (docs/acl.md): the signature Apache's AclClientRPCHook makes, the users a broker keeps, and
the gate that refuses unsigned or wrongly signed requests with NO_PERMISSION before any processor runs."""

from __future__ import annotations

import json

import pytest
from ferrymq.server.auth.acls import (
    Acl,
    Action,
    Decision,
    PolicyEntry,
    PolicyType,
    Resource,
)
from ferrymq.server.auth.authorization import Need, needs_of
from ferrymq.server.auth.control import AccessControl
from ferrymq.server.auth.errors import AuthenticationError
from ferrymq.server.auth.users import User, UserStatus, UserType
from ferrymq.server.config import AuthConfig
from ferrymq.wire.bodies import ConsumerData, HeartbeatData, SubscriptionData
from ferrymq.wire.codes import CURRENT_VERSION, RequestCode, ResponseCode
from ferrymq.wire.command import request
from ferrymq.wire.signature import sign, signed_content, signed_fields
from ferrymq.wire.versions import VERSION_NAMES

A, C = Action, RequestCode
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


# ---------------------------------------------------------------- authorization



def entry(resource, *actions, decision=Decision.ALLOW, ips=()):
    return PolicyEntry(Resource.parse(resource), tuple(actions), tuple(ips), decision)


@pytest.mark.parametrize(("code", "ext", "body", "needs"), [
    (C.SEND_MESSAGE_V2, {"a": "pg", "b": "T"}, b"", [Need(Resource.topic("T"), (A.PUB,))]),
    (C.SEND_MESSAGE_V2, {"a": "pg", "b": "%RETRY%cg"}, b"", [Need(Resource.group("pg"), (A.SUB,))]),
    (C.PULL_MESSAGE, {"topic": "T", "consumerGroup": "cg"}, b"",
     [Need(Resource.topic("T"), (A.SUB,)), Need(Resource.group("cg"), (A.SUB,))]),
    (C.PULL_MESSAGE, {"topic": "%RETRY%cg", "consumerGroup": "cg"}, b"", [Need(Resource.group("cg"), (A.SUB,))]),
    (C.HEART_BEAT, {"x": "1"}, HeartbeatData(client_id="c", consumer_data_set=[ConsumerData(
        group_name="cg", subscription_data_set=[SubscriptionData(topic="T"), SubscriptionData(topic="%RETRY%cg")])]
    ).encode(), [Need(Resource.group("cg"), (A.SUB,)), Need(Resource.topic("T"), (A.SUB,))]),
    (C.UPDATE_CONSUMER_OFFSET, {"topic": "T", "consumerGroup": "cg"}, b"",
     [Need(Resource.topic("T"), (A.SUB, A.UPDATE)), Need(Resource.group("cg"), (A.SUB, A.UPDATE))]),
    (C.GET_TOPIC_CONFIG, {"topic": "T"}, b"", [Need(Resource.topic("T"), (A.GET,))]),
    (C.DELETE_SUBSCRIPTIONGROUP, {"groupName": "cg"}, b"", [Need(Resource.group("cg"), (A.DELETE,))]),
    (C.AUTH_LIST_USER, {"filter": ""}, b"", [Need(Resource.parse("Cluster:DefaultCluster"), (A.GET,))]),
    (C.GET_CONSUME_STATS, {"consumerGroup": "cg", "topicList": "A;B"}, b"",
     [Need(Resource.group("cg"), (A.GET,)), Need(Resource.topic("A"), (A.GET,)), Need(Resource.topic("B"), (A.GET,))]),
    (C.GET_BROKER_CONFIG, {"x": "1"}, b"", []),
], ids=["send", "send-retry", "pull", "pull-retry", "heartbeat", "commit-offset", "annotated", "delete-group",
        "cluster", "split-list", "unannotated"])
def test_each_request_code_needs_the_actions_apache_maps_it_to(code, ext, body, needs):
    assert needs_of(request(code, ext, body), "DefaultCluster") == needs


def test_the_most_specific_matching_entry_decides():
    acl = Acl("User:u")
    acl.put([entry("Topic:*", A.PUB), entry("Topic:app-*", A.PUB, decision=Decision.DENY),
             entry("Topic:app-open", A.PUB), entry("Topic:app-open-*", A.SUB), entry("*", A.ALL, ips=["10.0.0.0/8"])])

    def allowed(name, action, ip="127.0.0.1"):
        e = acl.decide(Resource.topic(name), (action,), ip)
        return None if e is None else e.decision is Decision.ALLOW
    assert allowed("other", A.PUB) is True          # Topic:* (any)
    assert allowed("app-x", A.PUB) is False         # the prefix beats any
    assert allowed("app-open", A.PUB) is True       # the literal beats the prefix
    assert allowed("app-open-1", A.SUB) is True     # the longer prefix wins
    assert allowed("app-x", A.SUB) is None          # nothing for Sub from here
    assert allowed("app-x", A.SUB, "10.1.2.3") is True  # the Any resource, from the allowed source range
    acl.put([entry("Topic:app-x", A.PUB), entry("Topic:app-x", A.PUB, decision=Decision.DENY)])
    assert allowed("app-x", A.PUB) is False         # the same resource is replaced, not added
    deny_first = Acl("User:v")
    deny_first.put([entry("Group:g", A.SUB)], PolicyType.DEFAULT)
    assert deny_first.decide(Resource.group("%RETRY%g"), (A.SUB,), "1.1.1.1").decision is Decision.ALLOW


def test_a_normal_user_is_denied_what_its_acl_does_not_allow_and_a_super_user_is_not(bk, tmp_path):
    control = access(tmp_path, authorizationEnabled=True)
    control.users.create(User("alice", "alice-secret"))
    control.acls.put("User:alice", [entry("Topic:mine", A.PUB)])
    bk.table = control.guard(bk.table)
    ext = {"a": "pg", "b": "other", "c": "TBW102", "d": 4, "e": 0, "f": 0, "g": 1, "h": 0, "i": "", "j": 0,
           "k": False, "m": False}
    resp = bk.call(C.SEND_MESSAGE_V2, signed(ext, body=b"x"), b"x")
    assert resp.code == ResponseCode.NO_PERMISSION
    assert resp.remark == "User:alice has no permission to access Topic:other from 127.0.0.1, no matched policies."
    assert bk.call(C.SEND_MESSAGE_V2, signed({**ext, "b": "mine"}, body=b"x"), b"x").code == ResponseCode.SUCCESS
    root = bk.call(C.SEND_MESSAGE_V2, signed(ext, "rocketmq", "12345678", b"x"), b"x")
    assert root.code == ResponseCode.SUCCESS
    reloaded = access(tmp_path)
    assert reloaded.acls.get("User:alice").to_json() == control.acls.get("User:alice").to_json()


# ---------------------------------------------------------------- mqadmin's user and ACL commands


@pytest.fixture
def admin(bk, tmp_path):
    from ferrymq.remoting.dispatch import routes
    from ferrymq.server.broker.processors.access import AccessAdminProcessor

    control = access(tmp_path, authorizationEnabled=True)
    bk.table = control.guard({**bk.table, **routes([AccessAdminProcessor(control)])})
    return control


def as_root(ext, body=b""):
    return signed(ext, ROOT["username"], ROOT["password"], body)


def call_json(bk, code, ext, obj=None, signer=as_root):
    body = json.dumps(obj).encode() if obj is not None else b""
    return bk.call(code, signer(ext, body=body), body)


def test_users_are_created_listed_updated_and_deleted_as_mqadmin_does(bk, admin):
    ok = ResponseCode.SUCCESS
    assert call_json(bk, C.AUTH_CREATE_USER, {"username": "alice"}, {"password": "pw", "userType": "Normal"}).code == ok
    dup = call_json(bk, C.AUTH_CREATE_USER, {"username": "alice"}, {"password": "pw"})
    assert (dup.code, dup.remark) == (ResponseCode.NO_PERMISSION, "The user is existed")
    assert call_json(bk, C.AUTH_CREATE_USER, {"username": ""}, {"password": "pw"}).code == ResponseCode.INVALID_PARAMETER
    got = json.loads(call_json(bk, C.AUTH_GET_USER, {"username": "alice"}).body)
    assert got == {"username": "alice", "password": "pw", "userType": "Normal", "userStatus": "enable"}
    listed = json.loads(call_json(bk, C.AUTH_LIST_USER, {"filter": ""}).body)
    assert [u["username"] for u in listed] == ["alice", "rocketmq"]
    assert call_json(bk, C.AUTH_UPDATE_USER, {"username": "alice"}, {"userStatus": "disable"}).code == ok
    assert admin.users.get("alice").user_status is UserStatus.DISABLE
    # a normal user may not make a super user (and needs Cluster Update to try at all)
    admin.users.create(User("bob", "bob-pw"))
    admin.acls.put("User:bob", [entry("Cluster:*", A.UPDATE)])
    by_bob = call_json(bk, C.AUTH_CREATE_USER, {"username": "eve"}, {"password": "x", "userType": "Super"},
                       signer=lambda ext, body: signed(ext, "bob", "bob-pw", body))
    assert (by_bob.code, by_bob.remark) == (ResponseCode.SYSTEM_ERROR, "The super user can only be create by super user")
    assert call_json(bk, C.AUTH_DELETE_USER, {"username": "bob"}).code == ok
    assert admin.users.get("bob") is None and admin.acls.get("User:bob") is None


def acl_info(subject, *entries, policy_type="Custom"):
    return {"subject": subject, "policies": [{"policyType": policy_type, "entries": list(entries)}]}


def test_acls_are_created_merged_listed_and_deleted_as_mqadmin_does(bk, admin):
    admin.users.create(User("alice", "pw"))
    pub = {"resource": "Topic:orders-*", "actions": ["Pub"], "sourceIps": ["10.0.0.0/8"], "decision": "Allow"}
    sub = {"resource": "Group:billing", "actions": ["Sub", "Get"], "decision": "Allow"}
    assert call_json(bk, C.AUTH_CREATE_ACL, {"subject": "User:alice"}, acl_info("User:alice", pub)).code == 0
    assert call_json(bk, C.AUTH_UPDATE_ACL, {"subject": "User:alice"}, acl_info("User:alice", sub)).code == 0
    got = json.loads(call_json(bk, C.AUTH_GET_ACL, {"subject": "User:alice"}).body)
    assert got == {"subject": "User:alice", "policies": [{"policyType": "Custom", "entries": [
        pub, sub]}]}
    listed = json.loads(call_json(bk, C.AUTH_LIST_ACL, {"subjectFilter": "", "resourceFilter": "Group"}).body)
    assert [[e["resource"] for e in p["entries"]] for p in listed[0]["policies"]] == [["Group:billing"]]
    nobody = call_json(bk, C.AUTH_CREATE_ACL, {"subject": "User:nobody"}, acl_info("User:nobody", sub))
    assert (nobody.code, nobody.remark) == (ResponseCode.NO_PERMISSION, "The subject of User:nobody is not exist.")
    anything = call_json(bk, C.AUTH_CREATE_ACL, {"subject": "User:alice"},
                         acl_info("User:alice", {**sub, "actions": ["Any"]}))
    assert (anything.code, anything.remark) == (ResponseCode.NO_PERMISSION, "The actions can not be Any.")
    assert call_json(bk, C.AUTH_DELETE_ACL, {"subject": "User:alice", "resource": "Group:billing"}).code == 0
    assert [e.resource.key for e in admin.acls.get("User:alice").entries()] == ["Topic:orders-*"]
    assert call_json(bk, C.AUTH_DELETE_ACL, {"subject": "User:alice"}).code == 0
    gone = call_json(bk, C.AUTH_DELETE_ACL, {"subject": "User:alice"})
    assert (gone.code, gone.remark) == (ResponseCode.NO_PERMISSION, "The acl is not exist.")


# ---------------------------------------------------------------- ACL 1.0 migration

PLAIN_ACL = """\
globalWhiteRemoteAddresses:
  - 10.10.103.*
accounts:
  - accessKey: RocketMQ
    secretKey: 12345678
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - topicA=DENY
      - topicB=PUB|SUB
      - topicC=SUB
    groupPerms:
      - groupA=DENY
      - groupB=PUB|SUB
  - accessKey: rocketmq2
    secretKey: 12345678
    admin: true
  - accessKey: rocketmq
    secretKey: not-the-initial-users
"""


def test_plain_acl_accounts_become_users_and_acls_unless_the_user_exists(tmp_path):
    (tmp_path / "home" / "conf").mkdir(parents=True)
    (tmp_path / "home" / "conf" / "plain_acl.yml").write_text(PLAIN_ACL)
    control = AccessControl(AuthConfig(initAuthenticationUser=json.dumps(ROOT), migrateAuthFromV1Enabled=True),
                            str(tmp_path / "config"), "DefaultCluster", rocketmq_home=str(tmp_path / "home"))
    assert control.users.get("RocketMQ") == User("RocketMQ", "12345678", UserType.NORMAL, UserStatus.ENABLE)
    assert control.users.get("rocketmq2").is_super
    assert control.users.get("rocketmq").password == ROOT["password"]
    assert control.acls.get("User:rocketmq2") is None
    assert control.acls.get("User:RocketMQ").to_json() == {"subject": "User:RocketMQ", "policies": [
        {"policyType": "Custom", "entries": [
            {"resource": "Topic:topicA", "actions": ["All"], "decision": "Deny"},
            {"resource": "Topic:topicB", "actions": ["Pub", "Sub"], "decision": "Allow"},
            {"resource": "Topic:topicC", "actions": ["Sub"], "decision": "Allow"},
            {"resource": "Group:groupA", "actions": ["All"], "decision": "Deny"},
            {"resource": "Group:groupB", "actions": ["Pub", "Sub"], "decision": "Allow"}]},
        {"policyType": "Default", "entries": [
            {"resource": "Topic:*", "actions": ["All"], "decision": "Deny"},
            {"resource": "Group:*", "actions": ["Sub"], "decision": "Allow"}]}]}
    decide = control.acls.get("User:RocketMQ").decide
    assert decide(Resource.topic("topicB"), (A.PUB,), "1.2.3.4").decision is Decision.ALLOW
    assert decide(Resource.topic("elsewhere"), (A.PUB,), "1.2.3.4").decision is Decision.DENY


def test_the_gateways_log_users_in_by_password_or_signed_client_id_and_check_their_acl(tmp_path):
    from ferrymq.server.auth.gateway_access import GatewayAccess

    control = access(tmp_path, authorizationEnabled=True)
    control.users.create(User("alice", "alice-secret"))
    control.users.create(User("mallory", "pw", user_status=UserStatus.DISABLE))
    control.acls.put("User:alice", [entry("Topic:orders", A.PUB)])
    gateways = GatewayAccess(control)
    assert gateways.login("alice", b"alice-secret") == "alice"
    assert gateways.login("alice", sign(b"device-1", "alice-secret").encode(), "device-1") == "alice"
    assert gateways.login("alice", sign(b"device-1", "alice-secret").encode(), "device-2") is None
    for user, password in (("alice", b"guess"), ("alice", b""), ("alice", None), ("mallory", b"pw"),
                           ("nobody", b"x"), (None, b"alice-secret")):
        assert gateways.login(user, password) is None, (user, password)
    assert gateways.allows("alice", "Pub", "Topic:orders", "10.0.0.1")
    assert not gateways.allows("alice", "Sub", "Topic:orders", "10.0.0.1")
    assert not gateways.allows("alice", "Pub", "Topic:payments", "10.0.0.1")
    assert gateways.allows("rocketmq", "Sub", "Topic:payments", "10.0.0.1")  # the initial user is a super user
