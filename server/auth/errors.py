"""The two refusals of access control; the gate answers both with NO_PERMISSION and the message as remark,
as Apache's request pipeline does."""

from __future__ import annotations


class AuthenticationError(Exception):
    """The request's credentials do not identify an enabled user."""


class AuthorizationError(Exception):
    """The user may not do this action on this resource, or a rule could not be read."""
