"""Same shards, same spec: wds_cloud decodes exactly what webdataset 1.0.2 decodes."""

from __future__ import annotations

import numpy as np
import PIL.Image
import pytest
import torch
import webdataset

import wds_cloud.core.compat as core

SPECS = ["rgb8", "l", "torchrgb", "pil", "rgba8"]


@pytest.fixture(scope="module")
def shard(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("same") / "shard-000.tar"
    rng = np.random.default_rng(3)
    with webdataset.TarWriter(str(path)) as sink:
        for i in range(6):
            image = rng.integers(0, 256, size=(10, 7, 3), dtype=np.uint8)
            sink.write(
                {
                    "__key__": f"sample{i:03d}",
                    "jpg": image,
                    "seg.png": image[:, :, 0],
                    "cls": i,
                    "txt": f"text {i}",
                    "json": {"i": i, "tags": ["a", "b"]},
                    "npy": rng.random((3, 2)).astype(np.float32),
                    "ten": [np.arange(i + 1, dtype=np.int32)],
                    "pyd": {"nested": (i, "x")},
                    "mp": {"m": i},
                    "txt.gz": f"zipped {i}",  # the writer gzips it
                    "bin": bytes([i, 0, 255]),
                }
            )
    return str(path)


def _same(a: object, b: object) -> None:
    if isinstance(a, dict):
        assert isinstance(b, dict) and set(a) == set(b)
        for k in a:
            _same(a[k], b[k])
    elif isinstance(a, list | tuple):
        assert type(a) is type(b) and len(a) == len(b)
        for x, y in zip(a, b, strict=True):
            _same(x, y)
    elif isinstance(a, np.ndarray):
        assert isinstance(b, np.ndarray) and a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_array_equal(a, b)
    elif isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor) and a.dtype == b.dtype and torch.equal(a, b)
    elif isinstance(a, PIL.Image.Image):
        assert isinstance(b, PIL.Image.Image) and a.mode == b.mode and a.tobytes() == b.tobytes()
    else:
        assert type(a) is type(b) and a == b


@pytest.mark.parametrize("spec", [None, *SPECS])
def test_decoded_samples_identical(shard: str, spec: str | None) -> None:
    args = () if spec is None else (spec,)
    theirs = list(webdataset.WebDataset(shard, shardshuffle=False).decode(*args))
    ours = list(core.WebDataset(shard, shardshuffle=False).decode(*args))
    assert len(ours) == len(theirs) == 6
    for a, b in zip(ours, theirs, strict=True):
        a = {k: v for k, v in a.items() if k != "__local_path__"}
        b = {k: v for k, v in b.items() if k != "__local_path__"}
        _same(a, b)
    if spec is not None:
        assert not isinstance(ours[0]["jpg"], bytes)  # the images really were decoded
