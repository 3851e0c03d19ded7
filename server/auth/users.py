"""Users (Apache's ``User``): a name, a password that is the secret key of the client's signature, a type
(Super users pass every authorization) and a status (a disabled user is refused)."""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from .errors import AuthenticationError


class UserType(enum.Enum):
    SUPER = "Super"
    NORMAL = "Normal"

    @classmethod
    def parse(cls, name: str | None) -> UserType | None:
        """Apache's ``getByName``: case-insensitive; None for a blank or unknown name."""
        return next((t for t in cls if name and t.value.lower() == name.lower()), None)


class UserStatus(enum.Enum):
    ENABLE = "enable"
    DISABLE = "disable"

    @classmethod
    def parse(cls, name: str | None) -> UserStatus | None:
        return next((s for s in cls if name and s.value.lower() == name.lower()), None)


@dataclass
class User:
    username: str
    password: str | None = None
    user_type: UserType = UserType.NORMAL
    user_status: UserStatus = UserStatus.ENABLE

    @property
    def is_super(self) -> bool:
        return self.user_type is UserType.SUPER

    @property
    def subject_key(self) -> str:
        """How Apache names a user in ACLs and refusals: ``User:<name>``."""
        return f"User:{self.username}"

    def to_json(self) -> dict[str, Any]:
        """The stored form: Apache's field names and enum names."""
        return {"username": self.username, "password": self.password,
                "userType": self.user_type.value, "userStatus": self.user_status.value}

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> User:
        return cls(str(obj["username"]), obj.get("password"),
                   UserType.parse(obj.get("userType")) or UserType.NORMAL,
                   UserStatus.parse(obj.get("userStatus")) or UserStatus.ENABLE)


class Users:
    """The user table, saved whole through ``save`` (an atomic config-file write) after every change.

    The rules of create/update/delete are Apache's ``AuthenticationMetadataManagerImpl``'s, with its messages.
    """

    def __init__(self, save: Callable[[list[dict[str, Any]]], None] | None = None):
        self._users: dict[str, User] = {}
        self._save = save

    def load(self, obj: Any) -> None:
        for entry in obj or ():
            user = User.from_json(entry)
            self._users[user.username] = user

    def get(self, username: str) -> User | None:
        return self._users.get(username)

    def __iter__(self) -> Iterator[User]:
        return iter(self._users.values())

    def list(self, filter: str | None = None) -> list[User]:
        """Users whose name contains ``filter`` (every user when it is blank), by name."""
        return [u for name, u in sorted(self._users.items()) if not (filter and filter.strip()) or filter in name]

    def create(self, user: User) -> None:
        self._validate(user, creating=True)
        if user.username in self._users:
            raise AuthenticationError("The user is existed")
        self._users[user.username] = user
        self._persist()

    def ensure(self, user: User) -> None:
        """Create ``user`` unless one of that name exists (the configured initial and inner-client users)."""
        if user.username not in self._users:
            self.create(user)

    def update(self, username: str, password: str | None = None, user_type: UserType | None = None,
               user_status: UserStatus | None = None) -> User:
        if not username or not username.strip():
            raise AuthenticationError("username can not be blank")
        old = self._users.get(username)
        if old is None:
            raise AuthenticationError("The user is not exist")
        if password and password.strip():
            old.password = password
        if user_type is not None:
            old.user_type = user_type
        if user_status is not None:
            old.user_status = user_status
        self._persist()
        return old

    def delete(self, username: str) -> None:
        if not username or not username.strip():
            raise AuthenticationError("username can not be blank")
        if self._users.pop(username, None) is not None:
            self._persist()

    def to_json(self) -> list[dict[str, Any]]:
        return [u.to_json() for _, u in sorted(self._users.items())]

    def _persist(self) -> None:
        if self._save is not None:
            self._save(self.to_json())

    @staticmethod
    def _validate(user: User, creating: bool) -> None:
        if not user.username or not user.username.strip():
            raise AuthenticationError("username can not be blank")
        if creating and not (user.password and user.password.strip()):
            raise AuthenticationError("password can not be blank")
