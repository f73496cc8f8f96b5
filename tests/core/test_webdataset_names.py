"""webdataset 1.0.2 names added for compatibility, each compared with webdataset itself."""

from __future__ import annotations

import json
import os
import pickle
import random
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

import pytest
import webdataset

import wds_cloud as wds
from tests.support import tarbuild
from wds_cloud.core import utils
from wds_cloud.core.datasets import MockDataset, with_epoch, with_length
from wds_cloud.errors import ConfigError, SampleError, SampleKeyError

ROOT = Path(__file__).resolve().parents[2]


def _shard(path: Path, samples: list[dict[str, bytes]]) -> str:
    members = [
        (f"{sample['__key__']}.{ext}", data)
        for sample in samples
        for ext, data in sample.items()
        if ext != "__key__"
    ]
    return tarbuild.write(str(path), tarbuild.tar_bytes(members, fmt=tarfile.PAX_FORMAT))


def test_helpers_match_webdataset() -> None:
    rng = random.Random(0)
    for _ in range(300):
        args = tuple(rng.randint(-(10**6), 10**6) for _ in range(rng.randint(0, 5)))
        assert utils.make_seed(*args) == webdataset.utils.make_seed(*args)
        row = tuple(rng.random() for _ in range(rng.randint(1, 6)))
        assert utils.tuple2dict(row) == webdataset.filters.tuple2dict(row)
        assert utils.dict2tuple(utils.tuple2dict(row)) == row
        buf1 = list(range(rng.randint(1, 30)))
        buf2 = list(buf1)
        seed = rng.random()
        picked = [utils.pick(buf1, random.Random(seed)) for _ in range(len(buf1) // 2)]
        want = [webdataset.filters.pick(buf2, random.Random(seed)) for _ in range(len(buf2) // 2)]
        assert picked == want and buf1 == buf2
        fs = [None if rng.random() < 0.3 else (lambda x, k=k: x * k) for k in range(len(row))]
        fs = fs[: rng.randint(0, len(fs))]
        assert utils.transform_with(row, fs) == webdataset.filters.transform_with(row, fs)
    for obj in ("x", b"x", [1], (1,), iter([]), {1: 2}, 3, None, range(2)):
        assert utils.is_iterable(obj) == webdataset.utils.is_iterable(obj), obj
    assert utils.compose(lambda x: x + 1, lambda x: x * 10)(2) == 30
    with pytest.raises(ConfigError, match="at least one"):
        utils.compose()
    with pytest.raises(ConfigError, match="3 transformers for a sample of 2"):
        utils.transform_with((1, 2), [None, None, None])


def test_pipeline_stage_subclasses_run_in_a_pipeline() -> None:
    class Double(wds.PipelineStage):
        def run(self, src: Any) -> Any:
            for x in src:
                yield 2 * x

    assert list(wds.DataPipeline(lambda: iter(range(4)), Double())) == [0, 2, 4, 6]
    with pytest.raises(NotImplementedError, match=r"PipelineStage\.run"):
        list(wds.PipelineStage().run([]))


def test_mock_with_epoch_with_length_match_webdataset() -> None:
    assert list(MockDataset((1, 2), 5)) == list(webdataset.MockDataset((1, 2), 5))
    assert len(MockDataset("x", 7)) == 7
    with pytest.raises(ConfigError, match="length must be an integer"):
        MockDataset("x", -1)
    epoch = with_epoch(range(5), 3)
    passes = [list(epoch) for _ in range(4)]
    assert passes == [[0, 1, 2], [3, 4, 0], [1, 2, 3], [4, 0, 1]]
    # (webdataset 1.0.2's with_epoch cannot be instantiated: its __iter__ is abstract)
    assert list(with_epoch([], 3)) == [] and len(epoch) == 3
    copy = pickle.loads(pickle.dumps(epoch))
    assert copy.source is None and list(copy) == [0, 1, 2]
    sized = with_length(iter([1, 2]), 10)
    assert len(sized) == 10 and list(sized) == [1, 2]


def test_torch_datasets_are_iterable_datasets() -> None:
    from torch.utils.data import DataLoader, IterableDataset

    for cls in (wds.MockDataset, wds.with_epoch, wds.with_length):
        assert issubclass(cls, IterableDataset), cls
    loader = DataLoader(wds.MockDataset(3, 10), batch_size=4)
    assert [b.tolist() for b in loader] == [[3] * 4, [3] * 4, [3] * 2]


def test_xdecode_matches_webdataset(tmp_path: Path) -> None:
    rng = random.Random(1)
    samples = []
    for i in range(200):
        sample: dict[str, Any] = {"__key__": f"s{i:04d}"}
        sample["txt"] = f"text {i}".encode()
        sample["bin"] = bytes(rng.randrange(256) for _ in range(rng.randint(0, 40)))
        sample["cls"] = str(i % 9).encode()
        if i % 3 == 0:
            sample["pyd"] = pickle.dumps({"i": i})
        if i % 5 == 0:
            sample["json"] = json.dumps([i]).encode()
        samples.append(sample)
    url = _shard(tmp_path / "x.tar", samples)
    options: dict[str, Any] = {"cls": lambda s: int(s.read()), "must_decode": False}
    ours = list(
        wds.DataPipeline(wds.SimpleShardList(url), wds.tarfile_to_samples(), wds.xdecode(**options))
    )
    ref = list(
        webdataset.DataPipeline(
            webdataset.SimpleShardList(url),
            webdataset.tarfile_to_samples(),
            webdataset.xdecode(**options),
        )
    )
    assert len(ours) == 200 and ours == ref
    with pytest.raises(SampleError, match=r"no decoder for 'cls'.*key='s0000'") as info:
        list(wds.DataPipeline(wds.SimpleShardList(url), wds.tarfile_to_samples(), wds.xdecode()))
    assert isinstance(info.value, ValueError)


def test_xdecode_refuses_pickle_in_secure_mode(tmp_path: Path) -> None:
    url = _shard(tmp_path / "p.tar", [{"__key__": "a", "pyd": pickle.dumps(1)}])
    code = (
        "import wds_cloud as wds\n"
        f"ds = wds.DataPipeline(wds.SimpleShardList({url!r}), wds.tarfile_to_samples(), wds.xdecode())\n"
        "list(ds)\n"
    )
    # local shards allowed explicitly: secure mode refuses local files too
    env = {**os.environ, "WDS_SECURE": "1", "WDS_CLOUD_ALLOW_LOCAL": "1", "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert done.returncode == 1, done.stderr
    assert "Unpickling is not allowed for security reasons" in done.stderr
    assert "secure mode is on (WDS_SECURE=1 is set in the environment)" in done.stderr


def test_map_dict_missing_key_is_a_key_error_naming_it(tmp_path: Path) -> None:
    url = _shard(tmp_path / "m.tar", [{"__key__": "a", "txt": b"1"}])
    with pytest.raises(KeyError) as info:
        list(wds.WebDataset(url).map_dict(png=lambda x: x))
    assert isinstance(info.value, SampleKeyError) and isinstance(info.value, ValueError)
    assert "map_dict: key 'png' not in sample keys" in str(info.value)  # not KeyError's repr
    assert str(info.value).startswith("map_dict")


def test_cached_replays_the_first_full_pass(tmp_path: Path) -> None:
    url = _shard(tmp_path / "c.tar", [{"__key__": f"{i}", "txt": b"x"} for i in range(5)])
    seen: list[str] = []
    ds = wds.WebDataset(url).map(lambda s: seen.append(s["__key__"]) or s).mcached()
    first, second = list(ds), list(ds)
    assert [s["__key__"] for s in first] == [s["__key__"] for s in second] == list("01234")
    assert seen == list("01234")  # the second pass did not read the shard


def test_lmdb_cached_keeps_order_and_duplicate_keys_across_processes(tmp_path: Path) -> None:
    # two samples share key "k": webdataset's LMDBCached would keep one of them
    samples = [{"__key__": k, "txt": f"{i}".encode()} for i, k in enumerate("bkak")]
    url = _shard(tmp_path / "l.tar", samples)
    dest = str(tmp_path / "cache.lmdb")
    ds = wds.WebDataset(url).lmdb_cached(dest)
    first = [(s["__key__"], s["txt"]) for s in ds]
    assert first == [("b", b"0"), ("k", b"1"), ("a", b"2"), ("k", b"3")]
    os.rename(url, url + ".gone")  # later passes must not need the shard
    code = (
        "import pickle, sys\n"
        "import wds_cloud as wds\n"
        f"stage = wds.LMDBCached({dest!r})\n"
        "print([(s['__key__'], s['txt'].decode()) for s in stage.run(iter([]))])\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert done.stdout.strip() == "[('b', '0'), ('k', '1'), ('a', '2'), ('k', '3')]", done.stderr


def test_lmdb_cached_records_again_after_an_abandoned_pass(tmp_path: Path) -> None:
    stage = wds.LMDBCached(str(tmp_path / "a.lmdb"))
    it = stage.run(iter(range(10)))
    assert [next(it) for _ in range(3)] == [0, 1, 2]
    it.close()
    assert not stage.is_complete()
    assert list(stage.run(iter(range(4)))) == [0, 1, 2, 3]
    assert stage.is_complete() and list(stage.run(iter([99]))) == [0, 1, 2, 3]
    state = pickle.dumps(stage)  # as for DataLoader workers: the handle is not in it
    stage.close()  # LMDB allows one open handle per file and process
    assert list(pickle.loads(state).run(iter([]))) == [0, 1, 2, 3]
