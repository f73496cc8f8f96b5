"""``hf://`` through the real wds_cloud paths against the local Hub and its CDN
(:mod:`tests.support.hub_server`): WebDataset, list_shards and globs, list_sizes, index random
access, resumes after a cut at the CDN, tokens from the environment and the token file, and the
errors a user acts on. The token must reach the Hub and never the CDN."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import pytest

import wds_cloud as wds
from tests.hf.conftest import TOKEN, hf_registry
from tests.openers.conftest import make_shard
from tests.support import indexcheck
from tests.support.hub_server import HubServer
from wds_cloud.errors import ConfigError, ShardNotFoundError, ShardOpenError
from wds_cloud.index.build import build_index
from wds_cloud.listing import list_shards, list_sizes, resolve_shards
from wds_cloud.openers.hf.opener import HfConfig, HfOpener
from wds_cloud.openers.http.config import HttpConfig
from wds_cloud.openers.registry import OpenerRegistry

REPO = "datasets/org/shards"


def _shards(hub: HubServer, repo: str = REPO, n: int = 3, revision: str = "main") -> list[Path]:
    files = []
    for i in range(n):
        file = hub.add(repo, f"train/shard-{i:03d}.tar", b"", revision=revision)
        make_shard(file, i, samples=10)
        files.append(file)
    return files


def _keys(urls: Any, registry: OpenerRegistry) -> list[tuple[str, bytes]]:
    ds = wds.WebDataset(urls, registry=registry, shardshuffle=False)
    return [(s["__key__"], s["bin"]) for s in ds]


def _authorizations(hub: HubServer) -> tuple[set[str | None], set[str | None]]:
    """The ``Authorization`` values the Hub and the CDN received (None: none sent)."""
    at_hub = {h.get("Authorization") for _, _, h in hub.received}
    at_cdn = {h.get("Authorization") for _, h in hub.cdn.received}
    return at_hub, at_cdn


def test_webdataset_reads_a_private_repo_with_the_token_kept_from_the_cdn(
    hub: HubServer,
) -> None:
    files = _shards(hub)
    hub.private.add(REPO)
    registry = hf_registry(hub)
    got = _keys("hf://datasets/org/shards/train/shard-{000..002}.tar", registry)
    assert got == _keys([str(f) for f in files], OpenerRegistry())
    at_hub, at_cdn = _authorizations(hub)
    assert at_hub == {f"Bearer {TOKEN}"}
    assert at_cdn == {None}, "the token followed the redirect to the CDN"
    assert len(hub.cdn.received) == 3  # every shard came from the CDN


def test_environment_and_the_default_registry(
    hub: HubServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """``HF_ENDPOINT`` and ``HF_TOKEN`` through the built-in registration; a changed
    ``HF_TOKEN`` is used from the next shard on."""
    _shards(hub, n=1)
    hub.private.add(REPO)
    hub.tokens.add("hf_second_0002")
    monkeypatch.setenv("HF_ENDPOINT", hub.endpoint)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "nohome"))  # no token file
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    registry = OpenerRegistry()
    url = "hf://datasets/org/shards/train/shard-000.tar"
    assert len(_keys(url, registry)) == 10
    monkeypatch.setenv("HF_TOKEN", "hf_second_0002")
    assert len(_keys(url, registry)) == 10
    assert {h.get("Authorization") for _, _, h in hub.received} == {
        f"Bearer {TOKEN}",
        "Bearer hf_second_0002",
    }
    monkeypatch.delenv("HF_TOKEN")
    with pytest.raises(ShardOpenError, match="set HF_TOKEN"):
        registry.open(url)


@pytest.mark.parametrize("where", ["HF_HOME", "HF_TOKEN_PATH"])
def test_token_file(
    hub: HubServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, where: str
) -> None:
    """The token ``huggingface-cli login`` wrote: ``$HF_HOME/token`` or ``HF_TOKEN_PATH``."""
    _shards(hub, n=1)
    hub.private.add(REPO)
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.delenv("HUGGING_FACE_HUB_TOKEN", raising=False)
    home = tmp_path / "hfhome"
    home.mkdir()
    file = home / ("token" if where == "HF_HOME" else "elsewhere")
    file.write_text(TOKEN + "\n")
    monkeypatch.setenv(where, str(home if where == "HF_HOME" else file))
    opener = HfOpener(endpoint=hub.endpoint)
    assert opener.config.token == TOKEN
    assert TOKEN not in repr(opener)
    with opener.open("hf://datasets/org/shards/train/shard-000.tar") as stream:
        assert stream.read()[:3] != b""


def test_list_shards_globs_and_sizes_page_through_the_tree(hub: HubServer) -> None:
    files = _shards(hub, n=5)
    hub.add(REPO, "train/README.md", b"not a shard")
    hub.add(REPO, "train/sub/deep-000.tar", b"x" * 10)
    hub.add(REPO, "valid/v-000.tar", b"y" * 20)
    registry = hf_registry(hub)
    base = "hf://datasets/org/shards/train/"
    every = [f"{base}shard-{i:03d}.tar" for i in range(5)]
    assert list_shards(base, registry=registry) == [*every, f"{base}sub/deep-000.tar"]
    assert list_shards(f"{base}*.tar", registry=registry) == every
    assert resolve_shards(f"{base}shard-00[13].tar", registry=registry) == [every[1], every[3]]
    sizes = list_sizes(f"{base}*", registry=registry)
    assert sizes == sorted(
        [(u, f.stat().st_size) for u, f in zip(every, files, strict=True)]
        + [(f"{base}README.md", 11)]
    )
    pages = [t for m, t, _ in hub.received if "/tree/" in t and "cursor=" in t]
    assert pages, "the listing never asked for a second page"
    # a name prefix (wds-cloud ls): the folder it is in is listed
    assert list_shards(f"{base}shard-00", registry=registry, prefixes=True) == every
    # the repo's root, recursively
    assert "hf://datasets/org/shards/valid/v-000.tar" in list_shards(
        "hf://datasets/org/shards/", registry=registry
    )
    with pytest.raises(ShardNotFoundError, match="no shards"):
        list_shards("hf://datasets/org/shards/test/", registry=registry)


def test_revisions_models_and_spaces(hub: HubServer) -> None:
    """``@revision`` (special refs unencoded or encoded), models and Spaces: listing gives
    URLs spelled as the listed one, and each reads."""
    _shards(hub, n=2, revision="refs/convert/webdataset")
    _shards(hub, repo="models/org/model", n=1, revision="v1.0")
    _shards(hub, repo="spaces/org/app", n=1)
    registry = hf_registry(hub)
    for head in (
        "hf://datasets/org/shards@refs/convert/webdataset/",
        "hf://datasets/org/shards@refs%2Fconvert%2Fwebdataset/",
    ):
        urls = list_shards(f"{head}train/*.tar", registry=registry)
        assert urls == [f"{head}train/shard-000.tar", f"{head}train/shard-001.tar"]
        assert len(_keys(urls, registry)) == 20
    for url in ("hf://org/model@v1.0/train/", "hf://spaces/org/app/train/"):
        (shard,) = list_shards(url, registry=registry)
        assert len(_keys(shard, registry)) == 10
    with pytest.raises(ShardNotFoundError, match="revision 'main'"):
        registry.open("hf://org/model/train/shard-000.tar")


def test_index_random_access(hub: HubServer, tmp_path: Path) -> None:
    """``IndexedWebDataset`` on an ``hf://`` dataset JSON: every sample by ranged reads (the
    shards from the CDN, the small ``.idx`` files from the Hub itself)."""
    folder = hub.root / REPO / "main" / "idx"
    folder.mkdir(parents=True)
    names = []
    for name, blob in indexcheck.indexable_archives(6):
        (folder / name).write_bytes(blob)
        names.append(name)
    build_index([str(folder / n) for n in names], json=str(folder / "index.json"))
    registry = hf_registry(hub)
    urls = [f"hf://datasets/org/shards/idx/{n}" for n in names]
    want = indexcheck.sequential_samples(urls, registry)
    ds = wds.IndexedWebDataset("hf://datasets/org/shards/idx/index.json", registry=registry)
    assert ds.urls == urls
    assert [ds[i] for i in range(len(ds))] == want
    ranged = [h for _, h in hub.cdn.received if h.get("Range", "").count("-")]
    assert ranged and all("Authorization" not in h for _, h in hub.cdn.received)


def test_resume_after_the_cdn_cuts_the_connection(hub: HubServer) -> None:
    """A cut mid-shard resumes at its byte: the Hub is asked again (with the token), the CDN
    answers the ``Range`` (without it)."""
    (file,) = _shards(hub, n=1)
    hub.private.add(REPO)
    hub.cdn.cut_after, hub.cdn.cut_every = 20_000, 1
    opener = HfOpener(HfConfig(endpoint=hub.endpoint, token=TOKEN), HttpConfig(backoff=0))
    with opener.open("hf://datasets/org/shards/train/shard-000.tar") as stream:
        assert stream.read() == file.read_bytes()
    assert hub.cdn.cuts >= 2
    ranges = [h.get("Range") for _, h in hub.cdn.received]
    assert ranges[0] is None and ranges[1] == "bytes=20000-"
    assert all(h.get("If-Range") for _, h in hub.cdn.received[1:])  # pinned to the ETag
    at_hub, at_cdn = _authorizations(hub)
    assert at_hub == {f"Bearer {TOKEN}"} and at_cdn == {None}
    assert len(hub.received) == len(hub.cdn.received)  # each resume went through the Hub


def test_parallel_ranged_reads(hub: HubServer) -> None:
    """``WDS_CLOUD_HTTP_PREFETCH``: parts fetched by ranged GETs, each through the Hub."""
    (file,) = _shards(hub, n=1)
    hub.private.add(REPO)
    registry = hf_registry(hub, prefetch=3, prefetch_chunk=8192)
    with registry.open("hf://datasets/org/shards/train/shard-000.tar") as stream:
        assert stream.read() == file.read_bytes()
    ranges = {h.get("Range") for _, h in hub.cdn.received}
    assert len(ranges) == -(-file.stat().st_size // 8192) and None not in ranges
    at_hub, at_cdn = _authorizations(hub)
    assert at_hub == {f"Bearer {TOKEN}"} and at_cdn == {None}


def test_small_files_are_served_and_ranged_by_the_hub(hub: HubServer) -> None:
    hub.add(REPO, "meta/info.json", b'{"a": 1}')
    registry = hf_registry(hub)
    assert registry.read_range("hf://datasets/org/shards/meta/info.json", 2, 3) == b'a":'
    with registry.for_url("hf://x/y/z").open_at("hf://datasets/org/shards/meta/info.json", 5) as s:
        assert s.read() == b" 1}"
    assert not hub.cdn.received


def test_a_renamed_repo_is_followed_with_its_token(hub: HubServer) -> None:
    """The Hub answers 307 for a renamed repo: same origin, the token goes along."""
    _shards(hub, n=1)
    hub.private.add(REPO)
    hub.renamed["datasets/org/old-name"] = REPO
    registry = hf_registry(hub)
    assert len(_keys("hf://datasets/org/old-name/train/shard-000.tar", registry)) == 10
    assert list_shards("hf://datasets/org/old-name/train/", registry=registry) == [
        "hf://datasets/org/old-name/train/shard-000.tar"
    ]


# -- errors ---------------------------------------------------------------------------------


def test_private_and_gated_repos_say_to_set_hf_token(hub: HubServer) -> None:
    _shards(hub, n=1)
    _shards(hub, repo="datasets/org/gated", n=1)
    hub.private.add(REPO)
    hub.tokens.add("hf_other_0003")
    hub.gated["datasets/org/gated"] = {TOKEN}
    url = "hf://datasets/org/shards/train/shard-000.tar"
    for token, listing in (("", False), ("", True), ("hf_wrong_0004", False)):
        registry = hf_registry(hub, token=token, retries=0)
        with pytest.raises(ShardOpenError) as err:
            if listing:
                list_shards("hf://datasets/org/shards/train/", registry=registry)
            else:
                registry.open(url)
        text = str(err.value)
        assert "HTTP 401" in text and "dataset org/shards" in text, text
        assert ("set HF_TOKEN" in text) == (not token), text
        assert "hf_wrong_0004" not in text and "hf_wrong_0004" not in repr(err.value)
    gated = "hf://datasets/org/gated/train/shard-000.tar"
    with pytest.raises(ShardOpenError, match=r"HTTP 403.*cannot read it") as err:
        hf_registry(hub, token="hf_other_0003").open(gated)
    assert err.value.url == gated and "hf_other_0003" not in str(err.value)
    assert len(_keys(gated, hf_registry(hub))) == 10


def test_not_found_names_the_repo_revision_and_path(hub: HubServer) -> None:
    _shards(hub, n=1)
    registry = hf_registry(hub)
    cases = {
        "hf://datasets/org/shards/train/nope.tar": ["'train/nope.tar'", "revision 'main'"],
        "hf://datasets/org/shards@v9/train/shard-000.tar": ["revision 'v9'", "dataset org/shards"],
        "hf://datasets/org/missing/a.tar": ["dataset org/missing", "Repository not found"],
        # unencoded, a branch with "/" is a revision and a path: not found, as on the Hub
        "hf://datasets/org/shards@main/train/nope/x.tar": ["'train/nope/x.tar'"],
    }
    for url, parts in cases.items():
        with pytest.raises(ShardNotFoundError) as err:
            registry.open(url)
        assert err.value.url == url
        for part in parts:
            assert part in str(err.value), str(err.value)
    for url, part in (
        ("hf://datasets/org/shards@v9/train/", "revision 'v9' of dataset org/shards"),
        ("hf://datasets/org/missing/", "the dataset repo org/missing"),
    ):
        with pytest.raises(ShardNotFoundError, match=part):
            list_shards(url, registry=registry)


def test_bad_urls_and_folders(hub: HubServer) -> None:
    registry = hf_registry(hub)
    with pytest.raises(ConfigError, match="no ORG/REPO"):
        registry.open("hf://datasets/lonely")
    with pytest.raises(ConfigError, match="names a folder"):
        registry.open("hf://datasets/org/shards/train/")
    with pytest.raises(ConfigError, match="an hf:// listing covers one repo"):
        list_shards("hf://datasets/org/*/train/*.tar", registry=registry)
    with pytest.raises(ConfigError, match="must be an http:// or https:// URL"):
        HfOpener(endpoint="huggingface.co")
    assert not hub.received


def test_name_prefixes_of_several_repos_and_revisions_are_listed_each_in_its_own(
    hub: HubServer,
) -> None:
    """``wds-cloud ls`` mode: one spec naming two repos, or two revisions of one repo, lists each
    repo at its revision (not their common prefix, which names no repo or another revision)."""
    _shards(hub, "datasets/org/a", n=2)
    _shards(hub, "datasets/org/b", n=1)
    _shards(hub, "datasets/org/r", n=1, revision="v1")
    _shards(hub, "datasets/org/r", n=2, revision="v2")
    registry = hf_registry(hub)
    got = resolve_shards("hf://datasets/org/{a,b}/train", registry=registry, prefixes=True)
    assert got == [
        "hf://datasets/org/a/train/shard-000.tar",
        "hf://datasets/org/a/train/shard-001.tar",
        "hf://datasets/org/b/train/shard-000.tar",
    ]
    got = resolve_shards("hf://datasets/org/r@{v1,v2}/train", registry=registry, prefixes=True)
    assert got == [
        "hf://datasets/org/r@v1/train/shard-000.tar",
        "hf://datasets/org/r@v2/train/shard-000.tar",
        "hf://datasets/org/r@v2/train/shard-001.tar",
    ]


def test_the_opener_pickles_without_showing_its_token(hub: HubServer) -> None:
    from wds_cloud.openers import hf

    assert (hf.HfOpener, hf.HfConfig) == (wds.HfOpener, wds.HfConfig) == (HfOpener, HfConfig)
    _shards(hub, n=1)
    hub.private.add(REPO)
    opener = pickle.loads(pickle.dumps(HfOpener(endpoint=hub.endpoint, token=TOKEN)))
    assert TOKEN not in repr(opener) and TOKEN not in repr(opener.config)
    with opener.open("hf://datasets/org/shards/train/shard-000.tar") as stream:
        assert len(stream.read()) > 10_000


def test_the_local_hub_answers_head_like_the_hub(hub: HubServer) -> None:
    """``HEAD`` of a large file: 302 to the CDN with the size and ETag of the target (what
    ``huggingface_hub`` reads for metadata)."""
    import http.client

    (file,) = _shards(hub, n=1)
    conn = http.client.HTTPConnection("127.0.0.1", hub.port, timeout=10)
    conn.request("HEAD", "/datasets/org/shards/resolve/main/train/shard-000.tar")
    resp = conn.getresponse()
    assert resp.status == 302 and resp.getheader("X-Linked-Size") == str(file.stat().st_size)
    assert resp.getheader("Location", "").startswith(hub.cdn.url(""))
    conn.close()


def test_wds_cloud_ls_from_the_environment(
    hub: HubServer,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    """``wds-cloud ls`` with ``HF_ENDPOINT`` and ``HF_TOKEN``: a folder, and a name prefix."""
    from wds_cloud.cli import main

    _shards(hub, n=2)
    hub.private.add(REPO)
    monkeypatch.setenv("HF_ENDPOINT", hub.endpoint)
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    base = "hf://datasets/org/shards/train/"
    assert main(["ls", base, f"{base}shard-001"]) == 0
    out = capsys.readouterr().out.split()
    assert out == [f"{base}shard-000.tar", f"{base}shard-001.tar", f"{base}shard-001.tar"]
    monkeypatch.setenv("HF_TOKEN", "")  # empty: unset, and no token file in HF_HOME
    monkeypatch.setenv("HF_HOME", str(tmp_path))
    assert main(["ls", base]) == 1
    assert "set HF_TOKEN" in capsys.readouterr().err
