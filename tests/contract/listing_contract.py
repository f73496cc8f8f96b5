"""The behaviour every opener with ``list(url)`` must show, as a base test class.

``list(prefix_url)`` returns exactly the objects stored under the prefix, as full URLs in the
opener's own form, sorted (``Opener`` in :mod:`wds_cloud.openers.registry`; each backend's
``list`` docstring): nothing outside the prefix, no directory markers, nothing twice, and an
empty list for a prefix nothing starts with. An opener that also has ``list_sizes(url)`` returns
the same URLs with each object's size, equal to its stored length and to the size one request
for it announces (:func:`~wds_cloud.openers.streams.rangefile.object_size`).

To run it for a backend, subclass :class:`ListingContract` in a ``test_*.py`` module and
provide a ``listing_case`` fixture returning a :class:`ListingCase`: the opener, ``put(name,
data)`` storing an object under a fresh root (a new bucket or directory), and ``url(name)``
giving the URL the opener names that object (or prefix) by.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

#: stored under the fresh root; the tests list ``p/`` and the name prefix ``p/c-`` (not
#: ``p/a``: a local path naming a directory lists that directory, see ``LocalOpener.list``)
INSIDE = ("p/b.tar", "p/a.tar", "p/a/x.tar", "p/c-2.tar", "p/B.tar", "p/c-10.tar", "p/c/y.tar")
OUTSIDE = ("p.tar", "q/a.tar", "pp/a.tar", "a.tar")


@dataclass
class ListingCase:
    """What a backend's fixture provides to the listing contract."""

    opener: Any
    put: Callable[[str, bytes], None]
    url: Callable[[str], str]


class ListingContract:
    """Contract tests; subclasses provide the ``listing_case`` fixture."""

    @pytest.fixture
    def listing_case(self) -> ListingCase:  # pragma: no cover - overridden
        raise NotImplementedError("subclasses provide listing_case")

    @pytest.fixture
    def stored(self, listing_case: ListingCase) -> ListingCase:
        for n, name in enumerate(INSIDE + OUTSIDE):
            listing_case.put(name, name.encode() * (n + 1))
        return listing_case

    def test_directory_prefix_lists_exactly_what_was_written_sorted(
        self, stored: ListingCase
    ) -> None:
        got = stored.opener.list(stored.url("p/"))
        assert got == sorted(stored.url(name) for name in INSIDE)

    def test_name_prefix(self, stored: ListingCase) -> None:
        got = stored.opener.list(stored.url("p/c-"))
        expected = [n for n in INSIDE if n.startswith("p/c-")]
        assert len(expected) == 2 and got == sorted(stored.url(n) for n in expected)

    def test_prefix_nothing_starts_with_is_empty(self, stored: ListingCase) -> None:
        assert stored.opener.list(stored.url("p/zzz")) == []

    def test_listed_urls_open_to_the_stored_bytes(self, stored: ListingCase) -> None:
        names = INSIDE + OUTSIDE
        for url in stored.opener.list(stored.url("p/")):
            name = next(n for n in names if stored.url(n) == url)
            with stored.opener.open(url) as stream:
                assert stream.read() == name.encode() * (names.index(name) + 1)

    def test_list_sizes_are_the_listed_urls_with_their_stored_sizes(
        self, stored: ListingCase
    ) -> None:
        from wds_cloud.openers.capabilities import SizedLister
        from wds_cloud.openers.registry import OpenerRegistry
        from wds_cloud.openers.streams.rangefile import object_size

        if not isinstance(stored.opener, SizedLister):
            pytest.skip("this backend lists names only (local files: os.stat)")
        names = INSIDE + OUTSIDE
        registry = OpenerRegistry()
        scheme = stored.url("p/").split("://", 1)[0]
        registry.register(scheme, stored.opener, override=True)
        for prefix in ("p/", "p/c-", "p/zzz"):
            got = stored.opener.list_sizes(stored.url(prefix))
            assert [u for u, _ in got] == stored.opener.list(stored.url(prefix))
            for url, size in got:
                name = next(n for n in names if stored.url(n) == url)
                assert size == len(name) * (names.index(name) + 1) == object_size(url, registry)
