"""A broker's access control: its users and ACLs loaded from and saved to ``<storePathRootDir>/config``,
the configured initial users, and the gate placed in front of its processors."""

from __future__ import annotations

import json
import os

from ferrymq.remoting.dispatch import Processor
from ferrymq.server.config import AuthConfig
from ferrymq.server.store.config_files import ConfigFile

from .acls import Acls
from .authentication import Authenticator, parse_code_list
from .authorization import Authorizer
from .gate import AccessGate
from .migration import migrate, v1_files
from .users import User, Users, UserType

USERS = "users.json"
ACLS = "acls.json"


class AccessControl:
    """Users and ACLs of one broker, and its two checks. Built whether or not the checks are on: mqadmin's
    user and ACL commands are served either way, as Apache serves them.

    ``rocketmq_home`` (default ``$ROCKETMQ_HOME``) is where ACL 1.0 files are looked for when
    ``migrateAuthFromV1Enabled`` is set.
    """

    def __init__(self, config: AuthConfig, config_dir: str, cluster: str, rocketmq_home: str | None = None):
        self.config = config
        users_file = ConfigFile(config_dir, USERS)
        self.users = Users(users_file.save)
        self.users.load(users_file.load())
        acls_file = ConfigFile(config_dir, ACLS)
        self.acls = Acls(acls_file.save)
        self.acls.load(acls_file.load())
        self._init_users()
        home = os.environ.get("ROCKETMQ_HOME") if rocketmq_home is None else rocketmq_home
        if config.migrateAuthFromV1Enabled and home:
            migrate(self.users, self.acls, v1_files(home))
        self.authenticator = Authenticator(self.users, parse_code_list(config.authenticationWhitelist))
        self.authorizer = Authorizer(self.users, self.acls, cluster, parse_code_list(config.authorizationWhitelist))

    def _init_users(self) -> None:
        """Apache's ``initUser``: the initial user and the inner client's credentials become super users
        unless a user of that name exists."""
        if self.config.initAuthenticationUser.strip():
            obj = json.loads(self.config.initAuthenticationUser)
            self.users.ensure(User(obj["username"], obj["password"], UserType.SUPER))
        inner = self.config.inner_credentials
        if inner is not None:
            self.users.ensure(User(inner.access_key, inner.secret_key, UserType.SUPER))

    def guard(self, processor: Processor) -> Processor:
        """``processor`` behind the checks the config enables; ``processor`` itself when none is."""
        if not self.config.enabled:
            return processor
        return AccessGate(processor, self.authenticator if self.config.authenticationEnabled else None,
                          self.authorizer if self.config.authorizationEnabled else None)
