"""The access check in front of a processor table, placed once where requests are dispatched.

A broker without authentication or authorization serves its table directly: the gate exists only when one
of them is enabled, so an open broker pays nothing for it.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from ferrymq.remoting.dispatch import Processor, dispatch
from ferrymq.wire.codes import ResponseCode
from ferrymq.wire.command import RemotingCommand

from .errors import AuthenticationError, AuthorizationError

if TYPE_CHECKING:
    from ferrymq.remoting.channel import Channel

    from .authentication import Authenticator
    from .authorization import Authorizer

log = logging.getLogger("ferrymq.auth")


class AccessGate:
    """A processor that authenticates, then authorizes, each request before handing it to ``processor``.

    Either check may be None (disabled). A refusal is answered NO_PERMISSION with the reason as remark,
    as Apache's request pipeline answers it.
    """

    def __init__(self, processor: Processor, authenticator: Authenticator | None,
                 authorizer: Authorizer | None):
        self.processor = processor
        self.authenticator = authenticator
        self.authorizer = authorizer

    def __call__(self, cmd: RemotingCommand, channel: Channel) -> Any:
        try:
            if self.authenticator is not None:
                self.authenticator.check(cmd)
            if self.authorizer is not None:
                self.authorizer.check(cmd, channel.remote_address)
        except (AuthenticationError, AuthorizationError) as exc:
            log.info("request code %s from %s refused: %s", cmd.code, channel.remote_address, exc)
            return cmd.response(ResponseCode.NO_PERMISSION, str(exc))
        return dispatch(self.processor, cmd, channel)
