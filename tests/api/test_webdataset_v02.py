"""webdataset 0.2.x names that code pinned to ``webdataset<=0.2.86`` imports, run against
genuine webdataset 0.2.86 (downloaded into a temporary folder, imported in a subprocess) and
against wds_cloud through ``alias_webdataset()`` (also in a subprocess): the same streams,
cache layout, errors and samples."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.api.tarbytes import tar_bytes

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = r"""
import json, os, sys
{prelude}
import webdataset
from webdataset.cache import cached_url_opener, cached_tarfile_to_samples, get_file_cached
from webdataset.tariterators import base_plus_ext, tar_file_expander, url_opener, valid_sample

cache, bad, shards = sys.argv[1], sys.argv[2], sys.argv[3:]
out = {{}}


def rel(path):
    return os.path.relpath(path, cache) if path.startswith(cache) else path


def opened(srcs, **kw):
    errors = []

    def handler(exn):
        errors.append([type(exn).__name__, exn.args[-1]])
        return True

    got = []
    for s in cached_url_opener(iter(srcs), handler=handler, cache_dir=cache, **kw):
        got.append([sorted(k for k in s if k != "stream"), rel(s["stream"].name), len(s["stream"].read())])
        s["stream"].close()
    return got, errors


srcs = [{{"url": shards[0], "extra": 1}}, {{"url": "pipe:cat " + shards[1]}}, {{"url": "pipe:cat " + bad}}]
out["cached_always"] = opened(srcs, always=True)
out["cached_local"] = opened([{{"url": shards[2]}}, {{"url": bad}}])
out["bad_kept"] = os.path.exists(bad)
out["get_file_cached"] = rel(get_file_cached("pipe:cat " + shards[3], cache_dir=cache))
out["layout"] = sorted(os.path.relpath(os.path.join(d, f), cache) for d, _, fs in os.walk(cache) for f in fs)


def group_by_keys_nothrow(data, keys=base_plus_ext, lcase=True, suffixes=None, handler=None):
    # the grouping function open_clip's data.py re-implements (written for 0.2.x)
    current_sample = None
    for filesample in data:
        assert isinstance(filesample, dict)
        fname, value = filesample["fname"], filesample["data"]
        prefix, suffix = keys(fname)
        if prefix is None:
            continue
        if lcase:
            suffix = suffix.lower()
        if current_sample is None or prefix != current_sample["__key__"] or suffix in current_sample:
            if valid_sample(current_sample):
                yield current_sample
            current_sample = dict(__key__=prefix, __url__=filesample["__url__"])
        if suffixes is None or suffix in suffixes:
            current_sample[suffix] = value
    if valid_sample(current_sample):
        yield current_sample


def plain(samples):
    return [[s["__key__"], os.path.basename(s["__url__"]), sorted((k, v.decode()) for k, v in s.items() if not k.startswith("__"))] for s in samples]


streams = url_opener(iter([{{"url": u}} for u in shards]), handler=webdataset.reraise_exception)
out["copied_grouper"] = plain(group_by_keys_nothrow(tar_file_expander(streams)))
out["cached_samples"] = plain(cached_tarfile_to_samples(cache_dir=cache)(iter([{{"url": "pipe:cat " + u}} for u in shards])))
print(json.dumps(out))
"""


def _run(tmp: Path, pythonpath: str, prelude: str) -> dict[str, Any]:
    name = "run"  # the same paths for both runs: the cache layout names the URL's folder
    shutil.rmtree(tmp / name, ignore_errors=True)
    shards = []
    for s in range(4):
        shard = tmp / name / "data" / f"shard-{s}.tar"
        shard.parent.mkdir(parents=True, exist_ok=True)
        # the same keys at the end of one shard and the start of the next (0.2.x merges nothing
        # there either: the grouper splits on a repeated suffix)
        members = [(f"k{i:03d}.{ext}", f"{s}-{i}-{ext}".encode()) for i in range(5) for ext in ("jpg", "txt")]  # fmt: skip
        shard.write_bytes(tar_bytes(members))
        shards.append(str(shard))
    bad = tmp / name / "data" / "not-a-tar.tar"
    bad.write_bytes(b"hello, not a tar archive\n" * 3)
    cache = tmp / name / "cache"
    code = SCRIPT.format(prelude=prelude)
    env = {**os.environ, "PYTHONPATH": pythonpath}
    env.pop("WDS_CACHE", None)
    done = subprocess.run(
        [sys.executable, "-c", code, str(cache), str(bad), *shards],
        env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, Any] = json.loads(done.stdout)
    return json.loads(json.dumps(result).replace(str(tmp / name), "<tmp>"))


@pytest.mark.slow
def test_pinned_names_behave_as_webdataset_086(tmp_path: Path, webdataset_086: Path) -> None:
    genuine = _run(tmp_path, str(webdataset_086), "")
    ours = _run(tmp_path, str(ROOT), "import wds_cloud; wds_cloud.alias_webdataset()")
    assert len(genuine["copied_grouper"]) == len(genuine["cached_samples"]) == 20
    assert genuine["cached_always"][1] == [["ValueError", "pipe:cat <tmp>/data/not-a-tar.tar"]]
    assert len(genuine["cached_always"][0]) == 2 and len(genuine["layout"]) == 3
    # 0.2.86 deletes a local file that fails the validator; wds_cloud never deletes a user's file
    assert genuine["bad_kept"] is False and ours["bad_kept"] is True
    for key in genuine:
        if key != "bad_kept":
            assert ours[key] == genuine[key], key
