"""Fixtures of the replication unit tests: started stores in the test's temp dir (shut down after it)."""

from tests.store.conftest import make_store  # noqa: F401 - the fixture, shared with the store's tests
