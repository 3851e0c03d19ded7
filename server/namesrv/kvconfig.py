"""KV config (namespace -> key -> value), persisted as Apache's ``kvConfig.json``.

The file is ``{"configTable":{"<namespace>":{"<key>":"<value>"}}}``, so a kvConfig.json taken from an
Apache name server loads here and the other way round. Writing goes through an injected function so
the service can move the disk write off the reactor thread; the default writes atomically in place.
"""

from __future__ import annotations

import logging
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

import orjson

from ferrymq.wire.bodies import KVTable

log = logging.getLogger("ferrymq.namesrv")

#: Namespace of ordered-topic settings ("brokerName:queueNums;..."), sent to brokers on registration.
NAMESPACE_ORDER_TOPIC_CONFIG = "ORDER_TOPIC_CONFIG"


def atomic_write(path: str | os.PathLike, data: bytes) -> None:
    """Write ``data`` to ``path`` so a crash leaves either the old or the new content, never a torn file."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=target.name + ".", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    try:
        dir_fd = os.open(target.parent, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(dir_fd)
    except OSError:
        pass
    finally:
        os.close(dir_fd)


class KVConfigStore:
    def __init__(self, path: str | os.PathLike, write: Callable[[str, bytes], object] = atomic_write):
        self.path = str(path)
        self._write = write
        self.table: dict[str, dict[str, str]] = {}

    def load(self) -> None:
        """Read the file if it exists; an unreadable file is an error the operator must see."""
        try:
            content = Path(self.path).read_bytes()
        except FileNotFoundError:
            return
        if not content.strip():
            return
        try:
            data = orjson.loads(content)
            table = data.get("configTable") or {}
            self.table = {str(ns): {str(k): str(v) for k, v in kv.items()} for ns, kv in table.items()}
        except (orjson.JSONDecodeError, AttributeError, TypeError) as exc:
            raise ValueError(
                f"KV config file {self.path} is not kvConfig.json JSON ({exc}); fix or move it away"
            ) from None
        log.info("loaded KV config from %s: %d namespaces", self.path, len(self.table))

    def serialize(self) -> bytes:
        return orjson.dumps({"configTable": self.table})

    def persist(self) -> object:
        return self._write(self.path, self.serialize())

    def put(self, namespace: str, key: str, value: str) -> object:
        self.table.setdefault(namespace, {})[key] = value
        log.info("KV config put: namespace %s key %s", namespace, key)
        return self.persist()

    def get(self, namespace: str, key: str) -> str | None:
        return self.table.get(namespace, {}).get(key)

    def delete(self, namespace: str, key: str) -> object:
        kv = self.table.get(namespace)
        if kv is not None and kv.pop(key, None) is not None:
            log.info("KV config delete: namespace %s key %s", namespace, key)
        return self.persist()

    def list_namespace(self, namespace: str) -> KVTable | None:
        kv = self.table.get(namespace)
        return KVTable(table=dict(kv)) if kv is not None else None
