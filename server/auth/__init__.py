"""Access control as Apache RocketMQ 5.x's ACL 2.0: users who sign their requests, ACL rules granting them
actions on cluster, topic and group resources, and the gate that checks both before a request reaches the
broker's processors (docs/acl.md).

Gateways reuse :meth:`.authentication.Authenticator.authenticate` and :meth:`.authorization.Authorizer.authorize`
with their own credentials, so one set of users and rules covers every protocol.
"""
