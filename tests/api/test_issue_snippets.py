"""The webdataset code from the Core II issue runs unchanged with ``import wds_cloud as wds``.

Each test is one snippet, written exactly as users write it; only the URL points at local
shards made here, and ``preprocess``/``get_patches``/``my_decoder`` are the user's functions.
"""

from __future__ import annotations

import io
import json
import os
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
import torch
from PIL import Image

import wds_cloud as wds

NSHARDS, PER_SHARD = 4, 12
TOTAL = NSHARDS * PER_SHARD


def image_bytes(fmt: str, seed: int, size: tuple[int, int] = (8, 6)) -> bytes:
    rng = np.random.default_rng(seed)
    buf = io.BytesIO()
    Image.fromarray(rng.integers(0, 255, size=(*size[::-1], 3), dtype=np.uint8)).save(buf, fmt)
    return buf.getvalue()


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> str:
    root = tmp_path_factory.mktemp("snippets")
    with wds.ShardWriter(str(root / "shard-%d.tar"), maxcount=PER_SHARD) as sink:
        for i in range(TOTAL):
            sink.write(
                {
                    "__key__": f"s{i:04d}",
                    "png": image_bytes("PNG", i),
                    "big.jpg": image_bytes("JPEG", i, (16, 12)),
                    "json": json.dumps({"label": i % 3}).encode(),
                }
            )
    return str(root / f"shard-{{0..{NSHARDS - 1}}}.tar")


def preprocess(sample: tuple[Any, ...]) -> tuple[Any, ...]:
    image, meta = sample
    return image * 2.0, meta["label"]


def get_patches(src: Iterator[Any]) -> Iterator[Any]:
    """Two patches per sample: the left and right halves of the image."""
    for sample in src:
        if isinstance(sample, dict):
            yield sample  # the DataPipeline snippet uses it as a pass-through stage
            continue
        image, label = sample
        half = image.shape[1] // 2
        yield image[:, :half], label
        yield image[:, half : 2 * half], label


def test_webdataset_shuffle_decode_to_tuple(url: str) -> None:
    dataset = wds.WebDataset(url).shuffle(1000).decode("rgb").to_tuple("png", "json")
    samples = list(dataset)
    assert len(samples) == TOTAL
    image, meta = samples[0]
    assert image.shape == (6, 8, 3) and image.dtype == np.float32 and set(meta) == {"label"}


def test_map_compose_batched_then_webloader_rebatching(url: str) -> None:
    dataset = wds.WebDataset(url).shuffle(1000).decode("rgb").to_tuple("png", "json")
    dataset = dataset.map(preprocess).compose(get_patches).batched(16)
    loader = (
        wds.WebLoader(dataset, num_workers=4, batch_size=None).unbatched().shuffle(1000).batched(12)
    )
    batches = list(loader)
    patches = sum(len(labels) for _, labels in batches)
    assert patches == 2 * TOTAL  # every sample, two patches each, across 4 worker processes
    images, labels = batches[0]
    assert isinstance(images, torch.Tensor) and images.shape == (12, 6, 4, 3)
    assert isinstance(labels, torch.Tensor) and labels.shape == (12,)


def test_resampled_with_epoch(url: str) -> None:
    dataset = (
        wds.WebDataset(url, resampled=True)
        .shuffle(1000)
        .decode("rgb")
        .to_tuple("png", "json")
        .map(preprocess)
        .with_epoch(10000)
    )
    labels = [label for _, label in dataset]
    assert len(labels) == 10000 and set(labels) == {0, 1, 2}


def test_data_pipeline_with_explicit_stages(url: str) -> None:
    dataset = wds.DataPipeline(wds.SimpleShardList(url), wds.shuffle(100), wds.split_by_worker,
        wds.tarfile_to_samples(), wds.shuffle(1000), wds.decode("torchrgb"), get_patches,
        wds.shuffle(10000), wds.to_tuple("big.jpg", "json"), wds.batched(16))  # fmt: skip
    batches = list(dataset)
    assert sum(len(b[1]) for b in batches) == TOTAL
    images, metas = batches[0]
    assert isinstance(images, torch.Tensor) and images.shape == (16, 3, 12, 16)
    assert isinstance(metas, list) and "label" in metas[0]


def test_resampled_shards_pipeline_with_epoch(url: str) -> None:
    dataset = wds.DataPipeline(wds.ResampledShards(url), wds.tarfile_to_samples()).with_epoch(10000)
    keys = [s["__key__"] for s in dataset]
    assert len(keys) == 10000 and len(set(keys)) == TOTAL


def test_decoder_with_handle_extension(url: str) -> None:
    def my_decoder(data: bytes) -> tuple[int, int]:
        return Image.open(io.BytesIO(data)).size

    dataset = wds.WebDataset(url)
    dataset = wds.Decoder(wds.handle_extension(".png", my_decoder))(dataset)
    sample = next(iter(dataset))
    assert sample["png"] == (8, 6) and sample["json"] == {"label": 0}


def test_cbors_to_samples(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    import cbor2

    path = os.path.join(str(tmp_path), "test.cbors")
    with open(path, "wb") as f:
        for i in range(5):
            f.write(cbor2.dumps({"__key__": f"k{i}", "txt": f"text {i}".encode()}))
    monkeypatch.chdir(tmp_path)  # the snippet uses a relative path
    dataset = wds.DataPipeline(wds.SimpleShardList("test.cbors"), wds.cbors_to_samples())
    assert [(s["__key__"], s["txt"]) for s in dataset] == [
        (f"k{i}", f"text {i}".encode()) for i in range(5)
    ]


def test_webdataset_readme_cbor_section(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The README's "Alternative Representation: CBOR" cells, verbatim but for ``cbor``
    (unmaintained, no Python 3.11 wheel) -> ``cbor2``, which has the same dump/load."""
    import cbor2 as cbor
    import numpy as np

    monkeypatch.chdir(tmp_path)
    with open("test.cbors", "wb") as stream:
        for i in np.linspace(-5.0, 5.0, 1000):
            cbor.dump((i, str(i)[-5:]), stream)
    dataset = wds.DataPipeline(
        wds.SimpleShardList("test.cbors"),
        wds.cbors_to_samples(),
    )
    data = list(iter(dataset))
    assert (len(data), data[0]) == (1000, [-5.0, "-5.0"])
    assert data[1] == [-4.98998998998999, "98999"]


def test_shardshuffle_true(url: str) -> None:
    urls = wds.expand_urls(url)
    dataset = wds.WebDataset(urls, shardshuffle=True).shuffle(10)
    keys = [s["__key__"] for s in dataset]
    assert sorted(keys) == [f"s{i:04d}" for i in range(TOTAL)]


@pytest.mark.parametrize("where", ["package", "shardopen module", "samples module"])
def test_assigned_url_opener_is_used(url: str, where: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The S3 blog post plugs its own opener in by assigning the module's ``url_opener``; the
    same shape, opening local files, is honoured when assigned to ``wds_cloud.url_opener``,
    ``wds_cloud.core.shardopen.url_opener`` or (where the README named it before the module
    was split) ``wds_cloud.core.samples.url_opener``."""
    import wds_cloud.core.samples as samples_module
    import wds_cloud.core.shardopen as shardopen_module

    opened: list[str] = []

    def url_opener(data, handler=wds.reraise_exception, **kw):  # type: ignore[no-untyped-def]
        for sample in data:
            url = sample["url"]
            try:
                stream = open(url, "rb")
                opened.append(url)
                sample.update(stream=stream)
                yield sample
            except Exception as exn:
                exn.args = exn.args + (url,)  # noqa: RUF005 - as webdataset writes it
                if handler(exn):
                    continue
                else:
                    break

    target = {"package": wds, "shardopen module": shardopen_module}.get(where, samples_module)
    # core.samples has no url_opener of its own since the split: an assignment creates it
    monkeypatch.setattr(target, "url_opener", url_opener, raising=target is not samples_module)
    keys = [s["__key__"] for s in wds.WebDataset(url)]
    assert keys == [f"s{i:04d}" for i in range(TOTAL)]
    assert opened == wds.expand_urls(url)
    # a shard the user's opener cannot open goes through the handler like any open error
    missing = url.replace("shard-", "missing-")
    skip = wds.ContinueHandler()
    assert list(wds.WebDataset(missing, handler=skip, empty_check=False)) == []
    assert skip.count == NSHARDS
