"""Backends that turn a URL into a binary stream, behind one registry."""

from wds_cloud.openers.registry import (
    Opener,
    OpenerRegistry,
    default_registry,
    open_url,
    register_opener,
    url_scheme,
)
from wds_cloud.openers.streams.stream import ReadStream

__all__ = [
    "Opener",
    "OpenerRegistry",
    "ReadStream",
    "default_registry",
    "open_url",
    "register_opener",
    "url_scheme",
]
