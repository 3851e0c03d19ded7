"""The brokerId a controller assigned, kept across restarts in Apache's files and format.

``<storePathBrokerIdentity>`` (default ``<storePathRootDir>/brokerIdentity``) holds
``cluster#brokerName#brokerId`` once the controller granted the id. While it is being asked for, the
id is first written with a check code to ``<that path>-temp`` (``cluster#brokerName#brokerId#code``), so
a broker that crashes between asking and writing claims the same id with the same code again.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, slots=True)
class BrokerIdentity:
    cluster: str
    broker_name: str
    broker_id: int
    #: only in the temp file: ``brokerAddr;millis`` of the claim
    check_code: str = ""

    def encode(self) -> str:
        fields = [self.cluster, self.broker_name, str(self.broker_id)]
        if self.check_code:
            fields.append(self.check_code)
        return "#".join(fields)

    @classmethod
    def decode(cls, text: str, temp: bool) -> BrokerIdentity | None:
        parts = text.strip().split("#")
        if len(parts) < (4 if temp else 3) or not parts[0] or not parts[1]:
            return None
        try:
            broker_id = int(parts[2])
        except ValueError:
            return None
        return cls(parts[0], parts[1], broker_id, parts[3] if temp else "")


class IdentityFiles:
    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.temp_path = Path(f"{self.path}-temp")

    def read(self) -> BrokerIdentity | None:
        return self._read(self.path, temp=False)

    def read_temp(self) -> BrokerIdentity | None:
        return self._read(self.temp_path, temp=True)

    @staticmethod
    def _read(path: Path, temp: bool) -> BrokerIdentity | None:
        try:
            return BrokerIdentity.decode(path.read_text(), temp)
        except (FileNotFoundError, UnicodeDecodeError):
            return None

    def write_temp(self, identity: BrokerIdentity) -> None:
        _write(self.temp_path, identity.encode())

    def clear_temp(self) -> None:
        self.temp_path.unlink(missing_ok=True)

    def confirm(self, identity: BrokerIdentity) -> BrokerIdentity:
        """Keep ``identity`` (without its check code) as this broker's, and drop the claim."""
        kept = BrokerIdentity(identity.cluster, identity.broker_name, identity.broker_id)
        _write(self.path, kept.encode())
        self.clear_temp()
        return kept


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
