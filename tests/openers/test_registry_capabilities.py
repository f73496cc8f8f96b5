"""Opener capabilities: the protocols of ``wds_cloud.openers.capabilities``, ``remote`` and
``OpenerRegistry.capability``, for every built-in opener and for plugins that have less."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest

from tests.support.tarbuild import tar_bytes
from tests.support.typecheck import run_mypy
from wds_cloud.core.handlers import ignore_and_continue
from wds_cloud.core.shardopen import tarfile_samples
from wds_cloud.errors import ConfigError, UnsupportedSchemeError
from wds_cloud.listing import list_prefixes, list_shards, list_sizes
from wds_cloud.openers.ais.opener import AisOpener
from wds_cloud.openers.azure.opener import AzureOpener
from wds_cloud.openers.capabilities import (
    Creator,
    Lister,
    RangeReader,
    Seekable,
    SizedLister,
    is_remote,
)
from wds_cloud.openers.gcs.opener import GcsOpener
from wds_cloud.openers.hf.opener import HfOpener
from wds_cloud.openers.http.opener import HttpOpener
from wds_cloud.openers.local import LocalOpener
from wds_cloud.openers.pipe import PipeOpener
from wds_cloud.openers.registry import OpenerRegistry, open_sink
from wds_cloud.openers.s3.opener import S3Opener
from wds_cloud.openers.streams.rangefile import object_size
from wds_cloud.openers.streams.readahead import ReadAhead

ALL = (Lister, SizedLister, Creator, RangeReader, Seekable)

# what each built-in opener really supports, and whether it reads over a network
BUILTIN: dict[type, tuple[set[type], bool]] = {
    LocalOpener: ({Lister, Creator, RangeReader}, False),
    PipeOpener: ({Creator}, False),
    HttpOpener: ({RangeReader, Seekable}, True),
    HfOpener: ({Lister, SizedLister, RangeReader, Seekable}, True),
    S3Opener: (set(ALL), True),
    GcsOpener: (set(ALL), True),
    AzureOpener: (set(ALL), True),
    AisOpener: (set(ALL), True),
}
SCHEMES = {
    "file": LocalOpener,
    "pipe": PipeOpener,
    "http": HttpOpener,
    "https": HttpOpener,
    "hf": HfOpener,
    "s3": S3Opener,
    "gs": GcsOpener,
    "gcs": GcsOpener,
    "az": AzureOpener,
    "azure": AzureOpener,
    "abfs": AzureOpener,
    "abfss": AzureOpener,
    "ais": AisOpener,
}


def _url(scheme: str) -> str:
    return {"file": "/data/a.tar", "pipe": "pipe:cat a.tar"}.get(scheme, f"{scheme}://b/a.tar")


@pytest.mark.parametrize("cls", list(BUILTIN), ids=lambda c: c.__name__)
def test_builtin_openers_have_the_capabilities_they_support(cls: type) -> None:
    supported, remote = BUILTIN[cls]
    opener = cls()
    assert {p for p in ALL if isinstance(opener, p)} == supported
    assert "remote" in vars(cls), f"{cls.__name__} must declare remote"
    assert cls.remote is remote and is_remote(opener) is remote


@pytest.mark.parametrize("scheme", list(SCHEMES))
def test_registry_capability_answers_per_url(scheme: str) -> None:
    registry = OpenerRegistry()
    url = _url(scheme)
    opener = registry.for_url(url)
    assert type(opener) is SCHEMES[scheme]
    supported, remote = BUILTIN[SCHEMES[scheme]]
    for kind in ALL:
        assert registry.capability(url, kind) is (opener if kind in supported else None), kind
    assert registry.reads_ahead(url) is remote
    assert OpenerRegistry(readahead=0).reads_ahead(url) is False


class OpenOnly:
    """A plugin with ``open`` and nothing else (bytes from a dict)."""

    def __init__(self, objects: dict[str, bytes]) -> None:
        self.objects = objects
        self.opened: list[str] = []

    def open(self, url: str, **options: Any) -> io.BytesIO:
        self.opened.append(url)
        return io.BytesIO(self.objects[url])


class NoneMethods(OpenOnly):
    """A plugin whose capability methods are set to None: absent, as ``getattr`` said."""

    list = None
    list_sizes = None
    create = None
    read_range = None
    open_at = None


class Remote(OpenOnly):
    remote = True


@pytest.mark.parametrize("cls", [OpenOnly, NoneMethods])
def test_a_plugin_without_capabilities_keeps_its_errors_and_fallbacks(cls: type) -> None:
    data = bytes(range(256)) * 4
    plugin = cls({"obj://b/a.tar": data})
    registry = OpenerRegistry(builtins=False)
    registry.register("obj", plugin)
    assert all(registry.capability("obj://b/a.tar", kind) is None for kind in ALL)
    message = (
        "cannot list 'obj://b/*.tar' (from 'obj://b/*.tar'): the obj backend has no listing; "
        "give the shard names explicitly, e.g. with a brace template "
        "'shard-{000000..000099}.tar'"
    )
    with pytest.raises(ConfigError) as info:
        list_shards("obj://b/*.tar", registry=registry)
    assert str(info.value) == message
    with pytest.raises(ConfigError, match="has no listing"):
        list_sizes("obj://b/*.tar", registry=registry)
    # without list: each prefix is opened once to check that it exists
    assert list_prefixes(["obj://b/a.tar"], registry=registry) == {
        "obj://b/a.tar": ["obj://b/a.tar"]
    }
    with pytest.raises(UnsupportedSchemeError, match=r"opener \w+ cannot write \(it has no"):
        open_sink("obj://b/new.tar", registry)
    # without read_range: the stream read up to the range; without open_at: open and count
    assert registry.read_range("obj://b/a.tar", 300, 20) == data[300:320]
    assert object_size("obj://b/a.tar", registry) == len(data)
    assert registry.reads_ahead("obj://b/a.tar") is False  # no remote attribute: local
    with registry.open("obj://b/a.tar") as stream:
        assert not isinstance(stream, ReadAhead)


def test_a_plugin_with_list_is_listed_and_one_declaring_remote_is_read_ahead() -> None:
    class Listing(Remote):
        def list(self, url: str) -> list[str]:
            return sorted(u for u in self.objects if u.startswith(url))

    plugin = Listing({"obj://b/a.tar": b"x" * 10, "obj://b/c.tar": b"y"})
    registry = OpenerRegistry(builtins=False)
    registry.register("obj", plugin)
    assert registry.capability("obj://b/", Lister) is plugin
    assert list_shards("obj://b/*.tar", registry=registry) == ["obj://b/a.tar", "obj://b/c.tar"]
    assert registry.reads_ahead("obj://b/a.tar") is True
    with registry.open("obj://b/a.tar") as stream:
        assert isinstance(stream, ReadAhead)
        assert stream.read() == b"x" * 10


def test_capability_follows_a_new_registration() -> None:
    class Listing(OpenOnly):
        def list(self, url: str) -> list[str]:
            return []

    registry = OpenerRegistry(builtins=False)
    registry.register("obj", OpenOnly({}))
    assert registry.capability("obj://b/", Lister) is None
    lister = Listing({})
    registry.register("obj", lister, override=True)
    assert registry.capability("obj://b/", Lister) is lister
    registry.unregister("obj")
    registry.register("obj", OpenOnly({}))
    assert registry.capability("obj://b/", Lister) is None


def test_no_opener_means_no_read_ahead_and_the_handler_sees_the_open_error(
    tmp_path: Path,
) -> None:
    registry = OpenerRegistry()
    assert registry.reads_ahead("nope://b/a.tar") is False
    with pytest.raises(UnsupportedSchemeError):
        registry.capability("nope://b/a.tar", Lister)
    shard = tmp_path / "a.tar"
    shard.write_bytes(tar_bytes([("k.txt", b"v")]))
    samples = list(
        tarfile_samples(
            ["nope://b/x.tar", str(shard)], registry=registry, handler=ignore_and_continue
        )
    )
    assert [s["__key__"] for s in samples] == ["k"]


def test_capability_needs_a_class() -> None:
    with pytest.raises(TypeError, match="protocol class"):
        OpenerRegistry().capability("/a.tar", "list")


SNIPPET = """
from wds_cloud.openers import (
    Creator, Lister, OpenerRegistry, RangeReader, Seekable, SizedLister,
)
from wds_cloud.openers.ais.opener import AisOpener
from wds_cloud.openers.gcs.opener import GcsOpener
from wds_cloud.openers.hf.opener import HfOpener
from wds_cloud.openers.http.opener import HttpOpener
from wds_cloud.openers.local import LocalOpener
from wds_cloud.openers.pipe import PipeOpener
from wds_cloud.openers.s3.opener import S3Opener

listers: list[Lister] = [LocalOpener(), S3Opener(), GcsOpener(), AisOpener()]
sized: list[SizedLister] = [S3Opener(), GcsOpener(), AisOpener()]
creators: list[Creator] = [LocalOpener(), PipeOpener(), S3Opener(), GcsOpener(), AisOpener()]
ranged: list[RangeReader] = [LocalOpener(), HttpOpener(), S3Opener(), GcsOpener(), AisOpener()]
seekable: list[Seekable] = [HttpOpener(), S3Opener(), GcsOpener(), AisOpener()]
found = OpenerRegistry().capability("s3://b/", SizedLister)
reveal_type(found)
"""


def test_mypy_sees_builtin_openers_as_their_protocols(tmp_path: Path) -> None:
    result = run_mypy(tmp_path, SNIPPET + "wrong: Lister = HttpOpener()\n", strict=True)
    out = result.stdout
    revealed = [line for line in out.splitlines() if "Revealed type" in line]
    assert len(revealed) == 1 and "SizedLister | None" in revealed[0], out
    errors = [line for line in out.splitlines() if ": error:" in line]
    assert len(errors) == 1 and '"HttpOpener"' in errors[0] and '"Lister"' in errors[0], out
