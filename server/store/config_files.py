"""The broker's JSON metadata under ``<storePathRootDir>/config`` (topics.json, subscriptionGroup.json,
consumerOffset.json, delayOffset.json), written atomically with a ``.bak`` of the previous version.

A save writes ``<name>.tmp`` and fsyncs it, hard-links the current file to ``<name>.bak``, then
renames the temp file over the current one and fsyncs the directory: at every instant the file name
holds a complete version. Loading falls back to ``.bak`` when the file is missing or unreadable.
Files are read with the lenient fastjson reader, so those written by an Apache broker load too.
"""

from __future__ import annotations

import logging
import os
from typing import Any

from ferrymq.wire import fastjson
from ferrymq.wire.errors import BodyError

log = logging.getLogger(__name__)

TOPICS = "topics.json"
SUBSCRIPTION_GROUPS = "subscriptionGroup.json"
CONSUMER_OFFSETS = "consumerOffset.json"
DELAY_OFFSETS = "delayOffset.json"


class ConfigFile:
    def __init__(self, directory: str, name: str):
        self.path = os.path.join(directory, name)

    def load(self) -> Any | None:
        """The stored object, from the file or else its ``.bak``; None when neither is readable."""
        for path in (self.path, self.path + ".bak"):
            try:
                with open(path, "rb") as f:
                    data = f.read()
            except FileNotFoundError:
                continue
            if not data.strip():
                continue
            try:
                return fastjson.loads(data)
            except (BodyError, ValueError) as exc:
                log.error("config file %s is unreadable (%s); trying the backup", path, exc)
        return None

    def save(self, obj: Any) -> None:
        """Persist ``obj`` (dicts/lists, or objects with ``to_json()``) atomically."""
        data = obj if isinstance(obj, (bytes, bytearray)) else fastjson.dumps(obj)
        directory = os.path.dirname(self.path)
        os.makedirs(directory, exist_ok=True)
        tmp = self.path + ".tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
        bak = self.path + ".bak"
        if os.path.exists(self.path):
            try:
                os.unlink(bak)
            except FileNotFoundError:
                pass
            os.link(self.path, bak)
        os.replace(tmp, self.path)
        dfd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)


def config_file(config_dir: str, name: str) -> ConfigFile:
    return ConfigFile(config_dir, name)
