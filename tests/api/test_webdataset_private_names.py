"""webdataset's private names that copied training code imports (open_clip's ``data.py``
pattern): each gives the same result through wds_cloud's facades as through genuine
webdataset 1.0.2. The genuine package is imported normally; wds_cloud's side is read through
``webdataset_module`` (``alias_webdataset()`` is only run in a subprocess, never here)."""

from __future__ import annotations

import io
import random
import sys
from pathlib import Path
from typing import Any

import pytest
import webdataset
import webdataset.autodecode
import webdataset.cache
import webdataset.filters
import webdataset.handlers
import webdataset.pytorch
import webdataset.shardlists
import webdataset.tariterators
import webdataset.tenbin
import webdataset.utils
import webdataset.writer

import wds_cloud
from tests.api.tarbytes import tar_bytes
from wds_cloud.webdataset_api import webdataset_module

FILTER_STAGES = [
    "_associate", "_batched", "_decode", "_extract_keys", "_info", "_log_keys", "_map",
    "_map_dict", "_map_tuple", "_rename", "_rename_keys", "_rsample", "_select", "_shuffle",
    "_to_tuple", "_unbatched", "_unlisted", "_xdecode",
]  # fmt: skip
NAMES = {
    "filters": FILTER_STAGES,
    "tariterators": [
        "base_plus_ext", "url_opener", "tar_file_expander", "tar_file_iterator", "valid_sample",
        "group_by_keys", "meta_prefix", "meta_suffix",
    ],
    "cache": ["pipe_cleaner", "cached_url_opener"],
    "gopen": ["gopen"],
    "pytorch": ["IterableDataset", "DataLoader", "TorchTensor"],
    "writer": ["gopen"],
    "handlers": ["reraise_exception"],
    "utils": ["pytorch_worker_seed", "pytorch_worker_info", "PipelineStage"],
    "shardlists": ["expand_urls", "expand_source"],
    "autodecode": ["imagespecs"],
    "tenbin": ["encode_buffer"],
}  # fmt: skip


def ours(module: str, name: str) -> Any:
    return getattr(webdataset_module(module), name)


def theirs(module: str, name: str) -> Any:
    return getattr(sys.modules[f"webdataset.{module}"], name)


def test_every_filter_stage_of_webdataset_is_listed() -> None:
    genuine = {
        n
        for n in dir(webdataset.filters)
        if n.startswith("_") and not n.startswith("__") and callable(getattr(webdataset.filters, n))
    }
    assert genuine == set(FILTER_STAGES)


@pytest.mark.parametrize(("module", "name"), [(m, n) for m, ns in NAMES.items() for n in ns])
def test_importable_through_the_facade_and_the_package(module: str, name: str) -> None:
    assert getattr(webdataset_module(module), name) is not None
    if module != "gopen":  # wds_cloud.gopen is the function, as webdataset.gopen is
        assert getattr(getattr(wds_cloud, module), name) is ours(module, name)
    assert name not in webdataset_module(module).__all__ or not name.startswith("_")


def _member_names(n: int) -> list[str]:
    rng = random.Random(7)
    parts = ["a", "b.c", "__key__", "__x", "x__", ".", "..", "d/e", "", "F", "_", "__"]
    names = ["noext", ".hidden", "dir/.hidden", "a.b/c", "a/b.c.d", "__meta__", "__k__.txt"]
    names += ["".join(rng.choice(parts) + rng.choice(["", ".", "/"]) for _ in range(rng.randint(1, 5))) for _ in range(n)]  # fmt: skip
    return names


def test_base_plus_ext_and_valid_sample() -> None:
    for name in _member_names(3000):
        assert ours("tariterators", "base_plus_ext")(name) == webdataset.tariterators.base_plus_ext(name), name  # fmt: skip
    for sample in [None, {}, {"a": 1}, {"__bad__": True}, {"__bad__": False, "x": 1}, [1], "s"]:
        assert ours("tariterators", "valid_sample")(sample) == webdataset.tariterators.valid_sample(sample)  # fmt: skip
    assert (ours("tariterators", "meta_prefix"), ours("tariterators", "meta_suffix")) == ("__", "__")  # fmt: skip


def _files(seed: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    names = _member_names(60)
    out: list[dict[str, Any]] = []
    for i in range(400):
        if rng.random() < 0.05:
            out.append({})
            continue
        base = rng.choice(names[:40])
        ext = rng.choice(["jpg", "TXT", "json", "cls", "a.b"])
        out.append({"fname": f"{base}.{ext}" if rng.random() < 0.8 else base, "data": i, "__url__": f"u{i // 50}"})  # fmt: skip
    return out


@pytest.mark.parametrize("seed", range(5))
def test_group_by_keys(seed: int) -> None:
    def run(fn: Any) -> list[Any]:
        # a duplicate extension goes to the handler; both skip it
        return list(fn(iter(_files(seed)), handler=lambda exc: True))

    assert run(ours("tariterators", "group_by_keys")) == run(webdataset.tariterators.group_by_keys)


def _shard_members(seed: int) -> list[tuple[str, bytes]]:
    rng = random.Random(seed)
    out = [("__meta__", b"m"), ("__dir__/x.txt", b"m")]
    for i in range(20):
        for ext in rng.sample(["jpg", "txt", "cls", "json"], rng.randint(1, 3)):
            out.append((f"s{seed}/{i:03d}.{ext}", f"{seed}-{i}-{ext}".encode()))
    return out


def test_tar_file_iterator_and_expander(tmp_path: Path) -> None:
    blob = tar_bytes(_shard_members(1))
    kw: dict[str, Any] = {"select_files": lambda n: not n.endswith(".cls"), "rename_files": str.upper}  # fmt: skip
    for fn in (
        ours("tariterators", "tar_file_iterator"),
        webdataset.tariterators.tar_file_iterator,
    ):
        assert fn.__name__ == "tar_file_iterator"
    a = list(ours("tariterators", "tar_file_iterator")(io.BytesIO(blob), **kw))
    b = list(webdataset.tariterators.tar_file_iterator(io.BytesIO(blob), **kw))
    assert a == b and len(a) > 10
    for skip in (None, r".*/002"):
        a = list(ours("tariterators", "tar_file_iterator")(io.BytesIO(blob), skip_meta=skip))
        b = list(webdataset.tariterators.tar_file_iterator(io.BytesIO(blob), skip_meta=skip))
        assert a == b, skip
    paths = []
    for s in range(3):
        paths.append(tmp_path / f"s{s}.tar")
        paths[-1].write_bytes(tar_bytes(_shard_members(s)))

    def expand(mod: Any, **kw: Any) -> list[Any]:
        urls = [{"url": str(p)} for p in paths]
        out = list(mod.tar_file_expander(mod.url_opener(urls), **kw))
        return [{k: v for k, v in x.items() if k != "__local_path__"} for x in out]

    genuine = expand(webdataset.tariterators)
    assert genuine.count({}) == 3
    # through the facade: 0.2.86's expander, without 1.0.2's end-of-shard {} unless asked
    # (the groupers copied from open_clip read filesample["fname"] from it: KeyError)
    assert expand(webdataset_module("tariterators")) == [x for x in genuine if x]
    assert expand(webdataset_module("tariterators"), eof_value={}) == genuine
    assert expand(wds_cloud) == genuine  # wds_cloud's own keeps 1.0.2's marker


def test_filter_stages_on_generated_samples() -> None:
    rng = random.Random(3)
    samples = [{"__key__": f"k{i}", "a": rng.randint(0, 9), "b.txt": str(i)} for i in range(200)]
    cases: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = [
        ("_shuffle", (50, 10), {"rng": "R"}),
        ("_map", (lambda s: {**s, "a": s["a"] * 2},), {}),
        ("_select", (lambda s: s["a"] > 4,), {}),
        ("_batched", (7,), {"collation_fn": None}),
        ("_to_tuple", ("a", "b.txt"), {}),
        ("_rename", (), {"c": "a", "keep": False}),
        ("_map_dict", (), {"a": lambda x: x + 1}),
        ("_extract_keys", ("a", "*.txt"), {}),
        ("_rename_keys", (), {"z": "a"}),
        ("_rsample", (1.0,), {}),  # webdataset draws from the global random module
        ("_unlisted", (), {}),
    ]
    for name, args, kw in cases:
        results = []
        for fn in (ours("filters", name), theirs("filters", name)):
            random.seed(11)
            kw2 = {k: (random.Random(5) if v == "R" else v) for k, v in kw.items()}
            data = [[s] for s in samples] if name == "_unlisted" else samples
            results.append(list(fn(iter(data), *args, **kw2)))
        assert results[0] == results[1], name
    batches = [([i, i + 1, i + 2], ["x", "y", "z"]) for i in range(20)]  # columns of a batch
    assert list(ours("filters", "_unbatched")(iter(batches))) == list(webdataset.filters._unbatched(iter(batches)))  # fmt: skip
    tuples = list(webdataset.filters._to_tuple(iter(samples), "a", "b.txt"))
    f = (lambda x: x * 3, str.upper)
    assert list(ours("filters", "_map_tuple")(iter(tuples), *f)) == list(webdataset.filters._map_tuple(iter(tuples), *f))  # fmt: skip


def test_names_seen_in_training_code(tmp_path: Path) -> None:
    for name in ("IterableDataset", "DataLoader", "TorchTensor"):
        assert ours("pytorch", name) is getattr(webdataset.pytorch, name)
    rng = random.Random(5)
    specs: list[Any] = ["a{0..3}::b{1,2}", "s-{000..011}.tar", ["x", "y{1,2}"], ("t", "u"), [{"url": "a"}]]  # fmt: skip
    specs += [
        f"p{rng.randint(0, 9)}-{{{rng.randint(0, 3)}..{rng.randint(4, 9)}}}" for _ in range(20)
    ]
    for spec in specs:
        assert ours("shardlists", "expand_source")(spec) == webdataset.shardlists.expand_source(
            spec
        )
    assert ours("shardlists", "expand_source")(iter(range(50)), 7) == webdataset.shardlists.expand_source(iter(range(50)), 7)  # fmt: skip
    for bad in (3, None):
        with pytest.raises(ValueError, match="cannot handle"):
            ours("shardlists", "expand_source")(bad)
        with pytest.raises(ValueError, match="cannot handle"):
            webdataset.shardlists.expand_source(bad)
    blob = tmp_path / "blob.bin"
    blob.write_bytes(bytes(range(256)) * 40)
    with ours("writer", "gopen")(str(blob)) as a, webdataset.writer.gopen(str(blob)) as b:
        assert a.read() == b.read()


def test_other_names() -> None:
    assert ours("shardlists", "expand_urls")("a{0..3}::b{1,2}") == webdataset.shardlists.expand_urls("a{0..3}::b{1,2}")  # fmt: skip
    assert ours("autodecode", "imagespecs") == webdataset.autodecode.imagespecs
    assert ours("utils", "pytorch_worker_info")() == webdataset.utils.pytorch_worker_info()
    assert ours("utils", "pytorch_worker_seed")() == webdataset.utils.pytorch_worker_seed()
    assert ours("cache", "pipe_cleaner")("pipe:curl -s http://h/x.tar") == "http://h/x.tar"
    with pytest.raises(ValueError, match="boom"):
        ours("handlers", "reraise_exception")(ValueError("boom"))
    import numpy as np

    arrays = [np.arange(6, dtype=np.float32).reshape(2, 3), np.array([1, 2], dtype=np.int64)]
    assert bytes(ours("tenbin", "encode_buffer")(arrays)) == bytes(webdataset.tenbin.encode_buffer(arrays))  # fmt: skip
