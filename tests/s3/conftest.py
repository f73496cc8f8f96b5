"""Fixtures for the S3 backend tests: one SeaweedFS server per session, the faulty proxy."""

from tests.support.faulty_proxy import faulty_proxy

__all__ = ["faulty_proxy"]
