"""One table of shard specs, one expected shard list per spec, checked through every entry
point that takes a spec: the resolver itself, ``WebDataset`` (the shards it reads), the shard
lists, ``build_index``, ``check_index``, ``IndexedWebDataset``, every job of ``wds_cloud.jobs``
and every ``wds-cloud`` command that takes specs (``ls``, ``verify``, ``index``, ``job
verify|index|reshard|map|convert``), on local files, s3:// (SeaweedFS), gs://
(fake-gcs-server), az:// (Azurite) and ais:// (the AIStore emulator). Bad specs give the same
error everywhere.

Every stored shard holds one sample whose key names it, so the jobs that write shards
(``reshard``, ``map``, ``convert``) show the shards they read, in order, by the keys they wrote.
The command lines of one backend run in one process (``tests/support/cli_batch.py``), in the
folder of the local odd names, with the backend's environment.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.cli.backends import (
    Backend,
    ais_backend,
    azure_backend,
    gcs_backend,
    local_backend,
    s3_backend,
)
from tests.jobs.helpers import read_samples
from tests.support import tarbuild
from wds_cloud.cli.text import one_line
from wds_cloud.core.compat import WebDataset
from wds_cloud.core.shards import ResampledShards, SimpleShardList
from wds_cloud.errors import ShardNotFoundError
from wds_cloud.index.build import build_index
from wds_cloud.index.check import check_index
from wds_cloud.index.datasetjson import load_dataset_json
from wds_cloud.index.indexed import IndexedWebDataset
from wds_cloud.jobs import convert, index_job, map_shards, reshard, verify_job
from wds_cloud.listing import resolve_shards
from wds_cloud.openers.registry import OpenerRegistry, url_scheme

pytestmark = pytest.mark.slow

_ROOT = str(Path(__file__).resolve().parents[2])

# name under the backend's root -> the key of the shard's one sample
STORED = {
    "train/shard-000.tar": "t0",
    "train/shard-001.tar": "t1",
    "train/sub/shard-002.tar": "t2",
    "val/v-0.tar": "v0",
    "val/v-1.tar": "v1",
    # names that read as spec syntax, on every backend (an explicit list takes them as given)
    "odd/x[1].tar": "o1",
    "odd/y{a,b}.tar": "o2",
}
# local files only, in the working folder of the entry points: names a shell hands over
LOCAL_ODD = {"odd/w?.tar": "o3", "odd/pipe:cat z.tar": "o4", "odd/x1.tar": "o5"}
# the dataset index JSON (its shards in its own order, relative to it)
DATASET = ("train/sub/shard-002.tar", "val/v-0.tar")


@dataclass(frozen=True)
class Row:
    """A spec (``@`` is the backend's root) and the URLs it stands for.

    ``where``: ``all`` entry points; ``cli`` (a list of specs: the command line's arguments,
    and the resolver's default for a list); ``python`` (a list of URLs, taken as given by
    every library entry point: ``literal_paths=True``; on the command line too where each
    names an existing local file).
    """

    id: str
    spec: str | tuple[str, ...]
    urls: tuple[str, ...]
    local_only: bool = False
    where: str = "all"


ROWS = [
    Row(
        "braces", "@/train/shard-{000..001}.tar", ("@/train/shard-000.tar", "@/train/shard-001.tar")
    ),
    Row(
        "joined", "@/val/v-1.tar::@/train/shard-000.tar", ("@/val/v-1.tar", "@/train/shard-000.tar")
    ),
    Row("env", "${SPECROOT}/val/v-{0..1}.tar", ("@/val/v-0.tar", "@/val/v-1.tar")),
    Row("glob", "@/train/*.tar", ("@/train/shard-000.tar", "@/train/shard-001.tar")),
    Row(
        "globstar",
        "@/train/**/*.tar",
        ("@/train/shard-000.tar", "@/train/shard-001.tar", "@/train/sub/shard-002.tar"),
    ),
    Row(
        "prefix",
        "@/train/",
        ("@/train/shard-000.tar", "@/train/shard-001.tar", "@/train/sub/shard-002.tar"),
    ),
    Row("dataset-json", "@/meta/index.json", ("@/train/sub/shard-002.tar", "@/val/v-0.tar")),
    Row(
        "list-of-specs",
        ("@/train/*.tar", "@/meta/index.json", "@/val/v-1.tar"),
        (
            "@/train/shard-000.tar",
            "@/train/shard-001.tar",
            "@/train/sub/shard-002.tar",
            "@/val/v-0.tar",
            "@/val/v-1.tar",
        ),
        where="cli",
    ),
    Row(
        "list-of-urls",
        ("@/odd/x[1].tar", "@/odd/y{a,b}.tar", "@/val/v-0.tar"),
        ("@/odd/x[1].tar", "@/odd/y{a,b}.tar", "@/val/v-0.tar"),
        where="python",
    ),
    # existing local files and folders: the name as the shell gives it
    Row("file-with-brackets", "x[1].tar", ("x[1].tar",), local_only=True),
    Row("file-with-braces", "y{a,b}.tar", ("y{a,b}.tar",), local_only=True),
    Row("file-with-question-mark", "w?.tar", ("w?.tar",), local_only=True),
    Row("file-named-pipe", "pipe:cat z.tar", ("@/odd/pipe:cat z.tar",), local_only=True),
    Row("folder", "@/val", ("@/val/v-0.tar", "@/val/v-1.tar"), local_only=True),
]

BAD = [
    Row("glob-matches-nothing", "@/train/*.zip", ()),
    Row("empty-prefix", "@/nothing/", ()),
    Row("missing-dataset-json", "@/meta/missing.json", ()),
    # a plain path or URL that names nothing is not checked here: the read names it, as
    # webdataset's (tests/api/test_webdataset_api.py::test_a_missing_shard_fails_when_read...)
]


@dataclass
class Store:
    """A backend holding the shards, and every command line's result on it."""

    backend: Backend
    cwd: Path  # the working folder of the entry points
    env: dict[str, str]
    cli: dict[tuple[str, str], Any] = field(default_factory=dict)

    def at(self, text: str) -> str:
        return text.replace("@", self.backend.root)

    def spec(self, row: Row) -> Any:
        return self.at(row.spec) if isinstance(row.spec, str) else [self.at(s) for s in row.spec]

    def expected(self, row: Row) -> list[str]:
        return [self.at(u) for u in row.urls]

    def absolute(self, url: str) -> str:
        """A local path made absolute in the working folder; other URLs as they are."""
        return os.path.join(self.cwd, url) if url_scheme(url) == "file" else url

    def key_of(self, url: str) -> str:
        """The key of the sample stored in the shard ``url`` (as an entry point gives it)."""
        name = url[len(self.backend.root) + 1 :] if url.startswith(self.backend.root) else url
        keys = {**STORED, **LOCAL_ODD}
        return keys.get(name) or keys.get(f"odd/{name}") or f"<no shard {url}>"


def _shard(key: str) -> bytes:
    return tarbuild.tar_bytes(
        [(f"{key}.txt", key.encode()), (f"{key}.bin", b"b" * 10), (f"{key}.cls", b"0")]
    )


def _fill(backend: Backend) -> None:
    for name, key in STORED.items():
        backend.put(name, _shard(key))
    backend.put("train/notes.txt", b"not a shard")
    shardlist = [{"url": f"../{name}", "nsamples": 1} for name in DATASET]
    backend.put("meta/index.json", json.dumps({"shardlist": shardlist}).encode())
    if backend.name == "local":
        for name, key in LOCAL_ODD.items():
            backend.put(name, _shard(key))


def _backend(kind: str, request: pytest.FixtureRequest, tmp: Path) -> Backend:
    if kind == "local":
        return local_backend(tmp)
    if kind == "s3":
        return s3_backend(request.getfixturevalue("seaweed"))
    if kind == "gs":
        return gcs_backend(request.getfixturevalue("fake_gcs"))
    if kind == "az":
        return azure_backend(request.getfixturevalue("azurite"))
    return ais_backend(request.getfixturevalue("ais_server"))


@pytest.fixture(
    scope="module",
    params=[
        "local",
        pytest.param("s3", marks=pytest.mark.s3),
        pytest.param("gs", marks=pytest.mark.gcs),
        pytest.param("az", marks=pytest.mark.azure),
        pytest.param("ais", marks=pytest.mark.ais),
    ],
)
def store(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Store:
    tmp = tmp_path_factory.mktemp(f"specs-{request.param}")
    backend = _backend(request.param, request, tmp)
    # the working folder: where the local odd names are (elsewhere an empty folder)
    cwd = Path(backend.root) / "odd" if backend.name == "local" else tmp / "work"
    _fill(backend)
    cwd.mkdir(parents=True, exist_ok=True)
    env = {**backend.env, "WDS_SPECROOT": backend.root, "PYTHONPATH": _ROOT}
    found = Store(backend, cwd, env)
    found.cli = _run_cli(found, tmp / "cli")
    return found


# -- the command line ------------------------------------------------------------------------


_UPPER = "tests.jobs.helpers:upper"  # keeps the key


def _keys_written(out: Path) -> list[str]:
    return [s["__key__"] for s in read_samples(sorted(str(p) for p in out.glob("*.tar")))]


def _commands(args: list[str], out: Path) -> dict[str, tuple[list[str], Callable[[str], Any]]]:
    """Command name -> (argv, what its output says it read: URLs, or keys for writers)."""

    def dataset(name: str) -> Callable[[str], list[str]]:
        return lambda stdout: load_dataset_json(str(out / name)).urls

    def count(stdout: str) -> int:
        return int(json.loads(stdout)["tasks"])  # the summary counts the shards only

    return {
        "ls": (["ls", *args, "--json"], lambda s: json.loads(s)["shards"]),
        "verify": (
            ["verify", *args, "--json", "-q"],
            lambda s: [r["url"] for r in json.loads(s)["reports"]],
        ),
        "index": (["index", *args, "-o", str(out / "i.json"), "--json", "-q"], dataset("i.json")),
        "job verify": (["job", "verify", *args, "--json", "-q"], count),
        "job index": (
            ["job", "index", *args, "-o", str(out / "j.json"), "--json", "-q"],
            dataset("j.json"),
        ),
        "job reshard": (
            ["job", "reshard", *args, "-o", str(out / "r"), "--maxcount", "100", "--json", "-q"],
            lambda s: _keys_written(out / "r"),
        ),
        "job map": (
            ["job", "map", *args, "-o", str(out / "m"), "--fn", _UPPER, "--json", "-q"],
            lambda s: _keys_written(out / "m"),
        ),
        "job convert": (
            ["job", "convert", *args, "--from", "shards", "-o", str(out / "c"), "--json", "-q"],
            lambda s: _keys_written(out / "c"),
        ),
    }


def _cli_rows(store: Store) -> Iterator[Row]:
    for row in ROWS + BAD:
        if row.local_only and store.backend.name != "local":
            continue
        if row.where == "python" and store.backend.name != "local":
            continue  # on the command line each argument is a spec: s3://b/x[1].tar is a glob
        yield row


def _run_cli(store: Store, tmp: Path) -> dict[tuple[str, str], Any]:
    """Every command line of every row, in one process; what each read, or its error line."""
    planned = []
    for row in _cli_rows(store):
        spec = store.spec(row)
        args = [spec] if isinstance(spec, str) else spec
        (tmp / row.id).mkdir(parents=True)
        for name, (argv, read) in _commands(args, tmp / row.id).items():
            planned.append((row.id, name, argv, read))
    proc = subprocess.run(
        [sys.executable, "-m", "tests.support.cli_batch"],
        input=json.dumps([argv for _, _, argv, _ in planned]).encode(),
        capture_output=True,
        cwd=store.cwd,
        env=store.env,
        timeout=900,
        check=True,
    )
    results = {}
    for (row_id, name, _, read), result in zip(planned, json.loads(proc.stdout), strict=True):
        if result["rc"] == 0:
            results[row_id, name] = read(result["stdout"])
        else:
            results[row_id, name] = (result["rc"], result["stderr"])
    return results


# -- the library -----------------------------------------------------------------------------


def _library(spec: Any, registry: OpenerRegistry, out: Path) -> dict[str, list[str]]:
    """Entry point -> the shards it read (URLs; keys for the jobs that write shards)."""

    def written(summary: Any) -> list[str]:
        return [s["__key__"] for s in read_samples(summary.shards)]

    got = {
        "resolve_shards": resolve_shards(spec, registry=registry, literal_paths=True),
        "WebDataset": [
            s["__url__"] for s in WebDataset(spec, registry=registry, shardshuffle=False)
        ],
        "WebDataset(resampled)": WebDataset(spec, registry=registry, resampled=True)
        .pipeline[0]
        .urls,
        "SimpleShardList": SimpleShardList(spec, registry=registry).urls,
        "ResampledShards": ResampledShards(spec, registry=registry).urls,
        "build_index": [
            s.url
            for s in build_index(spec, json=False, write=False, registry=registry).dataset.shards
        ],
        "verify_job": [t.extra["url"] for t in verify_job(spec, registry=registry).tasks],
        "index_job": [t.extra["url"] for t in index_job(spec, json=False, registry=registry).tasks],
    }
    # the .idx files index_job wrote beside the shards
    got["IndexedWebDataset"] = IndexedWebDataset(spec, registry=registry).urls
    got["check_index"] = [c.url for c in check_index(spec, registry=registry)]
    got["reshard"] = written(
        reshard(spec, str(out / "r-%03d.tar"), maxcount=100, registry=registry)
    )
    got["map_shards"] = written(
        map_shards(spec, str(out / "m-%03d.tar"), lambda s: s, registry=registry)
    )
    got["convert"] = written(
        convert(spec, str(out / "c-%03d.tar"), kind="shards", registry=registry)
    )
    return got


_WRITERS = {"reshard", "map_shards", "convert", "job reshard", "job map", "job convert"}
LIBRARY = {
    "resolve_shards",
    "WebDataset",
    "WebDataset(resampled)",
    "SimpleShardList",
    "ResampledShards",
    "build_index",
    "verify_job",
    "index_job",
    "IndexedWebDataset",
    "check_index",
    "reshard",
    "map_shards",
    "convert",
}
CLI = {"ls", "verify", "index", "job verify", "job index", "job reshard", "job map", "job convert"}


def _env(store: Store, monkeypatch: pytest.MonkeyPatch) -> OpenerRegistry:
    """The test process as the command line's: the backend's environment, the working
    folder; a registry whose openers read that environment."""
    for name, value in store.env.items():
        if name not in os.environ or os.environ[name] != value:
            monkeypatch.setenv(name, value)
    monkeypatch.chdir(store.cwd)
    return OpenerRegistry()


@pytest.mark.parametrize("row", ROWS, ids=[r.id for r in ROWS])
def test_a_spec_gives_the_same_shards_through_every_entry_point(
    store: Store, row: Row, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if row.local_only and store.backend.name != "local":
        pytest.skip("a local file or folder")
    registry = _env(store, monkeypatch)
    expected = store.expected(row)
    keys = [store.key_of(u) for u in expected]
    spec = store.spec(row)
    got: dict[str, Any] = {}
    if row.where == "cli":  # several specs: the resolver's default for a list
        got["resolve_shards(list)"] = resolve_shards(spec, registry=registry)
    else:
        got.update(_library(spec, registry, tmp_path))
    if isinstance(spec, str):
        got["resolve_shards(prefixes=True)"] = resolve_shards(
            spec, registry=registry, prefixes=True
        )
    got.update({name: v for (rid, name), v in store.cli.items() if rid == row.id})
    wanted: dict[str, Any] = {name: expected for name in got}
    wanted.update({name: keys for name in _WRITERS & set(got)})
    for name in {"index", "job index"} & set(got):  # a JSON stores where, not the spelling
        wanted[name] = [store.absolute(u) for u in expected]
        if isinstance(got[name], list):  # else the command's error
            got[name] = [store.absolute(u) for u in got[name]]
    if "job verify" in got:
        wanted["job verify"] = len(expected)
    wrong = {name: value for name, value in got.items() if value != wanted[name]}
    assert not wrong, f"expected {expected} (keys {keys}); got {wrong}"
    names = {"resolve_shards(list)"} if row.where == "cli" else set(LIBRARY)
    if isinstance(spec, str):
        names.add("resolve_shards(prefixes=True)")
    if row in _cli_rows(store):
        names |= CLI
    assert set(got) == names


@pytest.mark.parametrize("row", BAD, ids=[r.id for r in BAD])
def test_a_bad_spec_gives_the_same_error_everywhere(
    store: Store, row: Row, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if row.local_only and store.backend.name != "local":
        pytest.skip("a local path")
    registry = _env(store, monkeypatch)
    spec = store.spec(row)
    with pytest.raises(ShardNotFoundError) as first:
        resolve_shards(spec, registry=registry)
    message = str(first.value)
    assert spec.rstrip("/") in message, message
    calls: dict[str, Callable[[], Any]] = {
        "WebDataset": lambda: WebDataset(spec, registry=registry),
        "WebDataset(resampled)": lambda: WebDataset(spec, registry=registry, resampled=True),
        "SimpleShardList": lambda: SimpleShardList(spec, registry=registry),
        "ResampledShards": lambda: ResampledShards(spec, registry=registry),
        "build_index": lambda: build_index(spec, registry=registry),
        "check_index": lambda: check_index(spec, registry=registry),
        "IndexedWebDataset": lambda: IndexedWebDataset(spec, registry=registry),
        "verify_job": lambda: verify_job(spec, registry=registry),
        "index_job": lambda: index_job(spec, registry=registry),
        "reshard": lambda: reshard(
            spec, str(tmp_path / "r-%03d.tar"), maxcount=9, registry=registry
        ),
        "map_shards": lambda: map_shards(
            spec, str(tmp_path / "m-%03d.tar"), lambda s: s, registry=registry
        ),
        "convert": lambda: convert(
            spec, str(tmp_path / "c-%03d.tar"), kind="shards", registry=registry
        ),
    }
    errors = {}
    for name, call in calls.items():
        with pytest.raises(ShardNotFoundError) as info:
            call()
        errors[name] = str(info.value)
    assert {name: m for name, m in errors.items() if m != message} == {}
    assert set(errors) == LIBRARY - {"resolve_shards"}
    line = f"error: {one_line(first.value)}\n"
    cli = {name: v for (rid, name), v in store.cli.items() if rid == row.id}
    assert set(cli) == CLI
    for name, result in cli.items():
        assert isinstance(result, tuple) and result[0] == 1, (name, result)
        assert result[1] == f"wds-cloud {name.split()[0]}: {line}", name
