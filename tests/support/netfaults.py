"""Shared pieces of the reset/stall tests every network backend runs through the faulty proxy.

- :data:`RESETS`: the connection faults of the safety issue, as pytest params
  ``(cut_after, reset)``: TCP resets every 256 KiB, 1 MiB and 3 MiB, and orderly closes every
  1 MiB (response bytes per connection, headers included).
- :func:`mixed_shard`: a ~3.6 MB tar of small samples with a few members over 1 MiB, random
  (incompressible) bytes, deterministic per index.
- :func:`read_exact`: reads a stream through the tar reader and checks that every sample
  arrives exactly once with the expected bytes.
- :class:`NetFaultContract`: the tests themselves, run by every network backend through a
  subclass that provides a ``net_case`` fixture (a :class:`NetCase`) and the ``faulty_proxy``
  fixture, as :mod:`tests.contract.opener_contract` does for openers.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO, Any

import pytest

from tests.support import tarbuild
from wds_cloud.core.samples import tar_samples
from wds_cloud.errors import ShardOpenError, ShardReadError

RESETS = [
    pytest.param(256 << 10, True, id="rst-256KiB"),
    pytest.param(1 << 20, True, id="rst-1MiB"),
    pytest.param(3 << 20, True, id="rst-3MiB"),
    pytest.param(1 << 20, False, id="close-1MiB"),
]

Samples = list[dict[str, Any]]


def mixed_shard(index: int = 0) -> tuple[bytes, Samples]:
    """A WebDataset tar of 30 samples: 28 small (``.txt`` + 16-40 KB ``.bin``), 2 of 1.5 MiB."""
    rng = random.Random(index)
    members: list[tuple[str, bytes]] = []
    expected: Samples = []
    for i in range(30):
        key = f"m{index:02d}/s{i:04d}"
        size = (3 << 19) if i in (7, 21) else rng.randrange(16_000, 40_000)
        sample = {"txt": f"{index}:{i}".encode(), "bin": rng.randbytes(size)}
        members += [(f"{key}.{ext}", data) for ext, data in sample.items()]
        expected.append({"__key__": key, **sample})
    return tarbuild.tar_bytes(members, mtime=0), expected


def read_exact(stream: IO[bytes], url: str, expected: Samples) -> None:
    """Every expected sample exactly once, in order, with equal bytes (``stream`` is closed)."""
    with stream:
        got = [{k: v for k, v in s.items() if k != "__url__"} for s in tar_samples(stream, url)]
    assert [s["__key__"] for s in got] == [s["__key__"] for s in expected]
    for have, want in zip(got, expected, strict=True):
        assert have == want, f"sample {want['__key__']} differs"


@dataclass
class NetCase:
    """What a backend provides to :class:`NetFaultContract`.

    Attributes:
        port: port of the real server (the proxy forwards to it), or ``port(name)`` giving the
            port that serves the bytes of object ``name`` (already stored): on a cluster that
            redirects reads (AIStore), the node that owns the object.
        put: stores ``data`` under ``name`` on the server.
        url: ``(proxy_url, name) -> URL`` that reaches ``name`` through the proxy.
        opener: ``(endpoint, read_timeout=None, stall_timeout=None) -> opener`` with fast
            backoff; ``None`` leaves the backend's setting as configured.
        default_opener: an opener with every setting at its default (environment cleared).
    """

    port: int | Callable[[str], int]
    put: Callable[[str, bytes], None]
    url: Callable[[str, str], str]
    opener: Callable[..., Any]
    default_opener: Callable[[], Any]

    def port_for(self, name: str) -> int:
        """The port a fault proxy for object ``name`` forwards to (see :attr:`port`)."""
        return self.port(name) if callable(self.port) else self.port


class NetFaultContract:
    """Resets, closes and stalls through :class:`FaultyProxy`; subclasses give ``net_case``."""

    @pytest.fixture
    def net_case(self) -> NetCase:  # pragma: no cover - overridden
        raise NotImplementedError("subclasses provide net_case")

    @pytest.mark.parametrize(("cut_after", "reset"), RESETS)
    def test_resets_and_closes_lose_nothing(
        self, net_case: NetCase, faulty_proxy: Any, cut_after: int, reset: bool
    ) -> None:
        data, expected = mixed_shard(1)
        net_case.put("mixed.tar", data)
        proxy = faulty_proxy(net_case.port_for("mixed.tar"), cut_after=cut_after, reset=reset)
        url = net_case.url(proxy.url, "mixed.tar")
        read_exact(net_case.opener(proxy.url).open(url), url, expected)
        assert proxy.cuts >= len(data) // cut_after

    def test_stall_then_recovery_resumes_after_the_bytes_received(
        self, net_case: NetCase, faulty_proxy: Any
    ) -> None:
        # Every connection goes silent after 1 MiB; the per-read timeout drops it and the next
        # request (which the proxy serves until its own 1 MiB) continues from the last byte.
        data, expected = mixed_shard(2)
        net_case.put("stall.tar", data)
        proxy = faulty_proxy(net_case.port_for("stall.tar"), stall_after=1 << 20)
        url = net_case.url(proxy.url, "stall.tar")
        read_exact(net_case.opener(proxy.url, read_timeout=0.5).open(url), url, expected)
        assert proxy.stalls >= 3

    def test_stalled_read_fails_naming_url_and_offset(
        self, net_case: NetCase, faulty_proxy: Any
    ) -> None:
        data, _ = mixed_shard(3)
        net_case.put("dead.tar", data)
        proxy = faulty_proxy(net_case.port_for("dead.tar"), stall_after=300_000, first=1)
        url = net_case.url(proxy.url, "dead.tar")
        stream = net_case.opener(proxy.url, stall_timeout=2).open(url)
        assert stream.read(1000) == data[:1000]
        proxy.set_fault(stall_after=0)  # from now on the server never sends another byte
        began = time.monotonic()
        with stream, pytest.raises(ShardReadError) as info:
            while stream.read(1 << 20):
                pass
        assert time.monotonic() - began < 30  # a hang guard, not a timing check
        assert "stalled" in info.value.reason
        assert info.value.url == url
        assert info.value.offset is not None and 1000 <= info.value.offset < 300_000

    def test_stall_before_the_first_byte_is_an_open_error(
        self, net_case: NetCase, faulty_proxy: Any
    ) -> None:
        net_case.put("mute.tar", b"x" * 10_000)
        proxy = faulty_proxy(
            net_case.port_for("mute.tar"), stall_after=0
        )  # requests arrive, nothing returns
        url = net_case.url(proxy.url, "mute.tar")
        began = time.monotonic()
        with pytest.raises(ShardOpenError) as info:
            net_case.opener(proxy.url, stall_timeout=1).open(url)
        assert time.monotonic() - began < 30  # a hang guard, not a timing check
        assert "stalled" in info.value.reason
        assert info.value.url == url
        assert info.value.offset == 0

    def test_default_stall_bound_is_at_most_two_minutes(
        self, net_case: NetCase, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        for name in list(os.environ):
            if name.startswith(("WDS_CLOUD_", "AIS_CONNECT_", "AIS_READ_")):
                monkeypatch.delenv(name)
        opener = net_case.default_opener()
        assert 0 < opener.config.stall_timeout <= 120
        assert opener.stall_bound() <= 120
