"""Classic master/slave replication, interoperable with Apache RocketMQ's DefaultHAService (docs/ha.md)."""

from .master import HAMaster
from .slave import HASlave

__all__ = ["HAMaster", "HASlave"]
