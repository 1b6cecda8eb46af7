"""Fixtures for the tests of the shared test infrastructure (``tests/support``)."""

from __future__ import annotations

from support.tls import tls_redis_server

# a fixture imported into a conftest is registered for the tests below it
__all__ = ["tls_redis_server"]
