"""Backends that turn a URL into a binary stream, behind one registry."""

from wds_cloud.openers.capabilities import Creator, Lister, RangeReader, Seekable, SizedLister
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
    "Creator",
    "Lister",
    "Opener",
    "OpenerRegistry",
    "RangeReader",
    "ReadStream",
    "Seekable",
    "SizedLister",
    "default_registry",
    "open_url",
    "register_opener",
    "url_scheme",
]
