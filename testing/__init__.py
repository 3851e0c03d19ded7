"""Real FerryMQ servers for the test suites of applications that use RocketMQ.

- :class:`FerryMQServer` (``ferrymq.testing.server``): ``ferrymq standalone`` in a child process on free
  loopback ports, over a temp store; ready in well under a second.
- ``ferrymq.testing.pytest_plugin``: the pytest plugin (registered as ``ferrymq``, loaded by pytest when
  FerryMQ is installed) with the ``ferrymq`` and ``ferrymq_factory`` fixtures; see docs/testing.md.
- ``ferrymq.testing.containers.FerryMQContainer``: the FerryMQ image under testcontainers-python, for
  suites that want the broker in a container.

Nothing here is imported until used: pytest loads the plugin in every session of an environment where
FerryMQ is installed, and a session that uses no server should not pay for it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .server import FerryMQServer, ServerStartError

__all__ = ["FerryMQServer", "ServerStartError"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from . import server

        return getattr(server, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
