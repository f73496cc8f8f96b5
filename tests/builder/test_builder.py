"""make_loader and DevicePrefetcher on real shards, real DataLoader workers (CPU)."""

from __future__ import annotations

from collections import namedtuple
from typing import Any

import pytest
import torch

from wds_cloud.errors import ConfigError
from wds_cloud.pytorch.builder import DevicePrefetcher, make_loader, move_to_device

from .conftest import NSHARDS, PER_SHARD

TOTAL = NSHARDS * PER_SHARD


def _labels(loader: Any) -> list[int]:
    out: list[int] = []
    for images, labels in loader:
        assert isinstance(images, torch.Tensor) and isinstance(labels, torch.Tensor)
        assert images.shape[1:] == (2, 2)
        assert torch.equal(images[:, 0, 0].long(), labels)  # fields stay paired
        out.extend(labels.tolist())
    return out


def test_one_pass_two_workers_reads_every_sample_once(shard_urls: list[str]) -> None:
    loader = make_loader(
        shard_urls,
        batch_size=8,
        num_workers=2,
        to_tuple="npy cls",
        decode="rgb8",
        seed=1,
    )
    labels = _labels(loader)
    assert sorted(labels) == list(range(TOTAL))


def test_exact_epoch_size_with_two_workers(shard_urls: list[str]) -> None:
    loader = make_loader(
        shard_urls,
        batch_size=7,
        num_workers=2,
        to_tuple="npy cls",
        decode="rgb8",
        epoch_size=25,
        inner_batch=3,
        resampled=True,
    )
    assert len(loader) == 4
    for epoch in range(2):
        loader.set_epoch(epoch)
        batches = list(loader)
        assert [len(b[1]) for b in batches] == [7, 7, 7, 4]


def test_epoch_size_larger_than_dataset_restarts(shard_urls: list[str]) -> None:
    loader = make_loader(
        shard_urls,
        batch_size=10,
        num_workers=2,
        to_tuple="npy cls",
        decode="rgb8",
        epoch_size=TOTAL + 15,
    )
    labels = _labels(loader)
    assert len(labels) == TOTAL + 15
    assert set(labels) == set(range(TOTAL))


def test_no_workers_dict_samples_and_map(shard_urls: list[str]) -> None:
    loader = make_loader(
        shard_urls,
        batch_size=16,
        num_workers=0,
        shuffle_buffer=0,
        shardshuffle=False,
        decode="rgb8",
        map=lambda s: {"x": s["npy"], "y": s["cls"]},
    )
    batches = list(loader)
    assert [len(b["y"]) for b in batches] == [16, 16, 8]
    assert torch.cat([b["y"] for b in batches]).tolist() == list(range(TOTAL))


def test_custom_collate_is_used(shard_urls: list[str]) -> None:
    loader = make_loader(
        shard_urls, batch_size=5, num_workers=0, to_tuple="cls", collate=lambda s: len(s)
    )
    assert sum(loader) == TOTAL


def test_device_cpu_passes_batches_through(shard_urls: list[str]) -> None:
    loader = make_loader(
        shard_urls,
        batch_size=8,
        num_workers=0,
        to_tuple="npy cls",
        decode="rgb8",
        device="cpu",
        prefetch_to_device=True,
    )
    assert isinstance(loader, DevicePrefetcher)
    assert sorted(_labels(loader)) == list(range(TOTAL))


def test_prefetcher_on_cpu_yields_the_same_objects() -> None:
    Pair = namedtuple("Pair", "a b")
    batches = [
        (torch.arange(3), [torch.ones(2)], {"k": torch.zeros(1), "s": "text"}),
        Pair(torch.tensor([1.0]), 5),
    ]
    out = list(DevicePrefetcher(batches, "cpu"))
    assert len(out) == 2
    assert all(x is y for x, y in zip(out, batches, strict=True))


def test_move_to_device_keeps_structure() -> None:
    Pair = namedtuple("Pair", "a b")
    batch = {"t": (torch.arange(2), [torch.ones(1)]), "p": Pair(torch.zeros(1), "x"), "n": 3}
    moved = move_to_device(batch, torch.device("meta"))
    assert moved["t"][0].device.type == "meta" and isinstance(moved["t"], tuple)
    assert isinstance(moved["t"][1], list) and moved["t"][1][0].device.type == "meta"
    assert isinstance(moved["p"], Pair) and moved["p"].b == "x" and moved["n"] == 3


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-CUDA error")
def test_cuda_device_without_cuda_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="CUDA is not available"):
        DevicePrefetcher([], "cuda")


@pytest.mark.parametrize(
    "kw",
    [
        {"batch_size": 0},
        {"batch_size": 2, "epoch_size": 0},
        {"batch_size": 2, "inner_batch": 0},
        {"batch_size": 2, "prefetch_to_device": True},
    ],
)
def test_bad_arguments(shard_urls: list[str], kw: dict[str, Any]) -> None:
    with pytest.raises(ConfigError):
        make_loader(shard_urls, **kw)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_prefetcher_cuda_moves_and_matches(shard_urls: list[str]) -> None:
    loader = make_loader(
        shard_urls,
        batch_size=8,
        num_workers=2,
        to_tuple="npy cls",
        decode="rgb8",
        device="cuda",
        prefetch_to_device=True,
        pin_memory=True,
    )
    labels = []
    for images, cls in loader:
        assert images.is_cuda and cls.is_cuda
        assert torch.equal(images[:, 0, 0].long(), cls)
        labels.extend(cls.cpu().tolist())
    assert sorted(labels) == list(range(TOTAL))


@pytest.mark.parametrize("workers", [0, 2])
def test_device_prefetcher_on_cpu_resumes_exactly(shard_urls: list[str], workers: int) -> None:
    """On a device batches are not read ahead for, the prefetcher's state is the loader's: a
    checkpoint mid-epoch resumes with every sample once."""
    import json

    def make() -> Any:
        return make_loader(
            shard_urls,
            batch_size=8,
            num_workers=workers,
            to_tuple="npy cls",
            decode="rgb8",
            shuffle_buffer=16,
            seed=3,
            device="cpu",
            prefetch_to_device=True,
        )

    first = make()
    assert isinstance(first, DevicePrefetcher)
    seen: list[int] = []
    for step, (_, labels) in enumerate(first, 1):
        seen += [int(x) for x in labels]
        if step == 3:
            state = json.loads(json.dumps(first.state_dict()))
            break
    rest = make()
    rest.load_state_dict(state)
    seen += _labels(rest)
    assert sorted(seen) == list(range(TOTAL))


def _resume_loader(shard_urls: list[str], **kw: Any) -> Any:
    return make_loader(
        shard_urls,
        batch_size=8,
        num_workers=2,
        to_tuple="npy cls",
        decode="rgb8",
        shuffle_buffer=16,
        seed=3,
        **kw,
    )


@pytest.mark.parametrize("stop", [1, 2, 4])
def test_read_ahead_state_is_that_of_the_batch_handed_out(shard_urls: list[str], stop: int) -> None:
    """``ReadAhead`` (the CUDA prefetcher's loop, here with a CPU ``prepare``) has read one
    batch more than it handed out when a checkpoint is taken: its state is that of the handed
    out batches, so the resumed loader delivers every sample once; the loader's own state at
    that moment would skip the batch read ahead."""
    import json

    from wds_cloud.pytorch.builder import ReadAhead

    loader = _resume_loader(shard_urls)
    prepared: list[int] = []

    def prepare(batch: Any) -> Any:
        prepared.append(len(batch[1]))
        return batch

    ahead = ReadAhead(loader, prepare)
    seen: list[int] = []
    for step, (_, labels) in enumerate(ahead, 1):
        seen += [int(x) for x in labels]
        if step == stop:
            state = json.loads(json.dumps(ahead.state()))
            own = loader.state_dict()
            break
    assert len(prepared) == stop + 1  # one batch read ahead
    assert state["delivered"] == len(seen) and own["delivered"] == len(seen) + prepared[-1]
    rest = _resume_loader(shard_urls)
    rest.load_state_dict(state)
    seen += _labels(rest)
    assert sorted(seen) == list(range(TOTAL))


def test_read_ahead_runs_an_unresumable_loader_and_says_why(shard_urls: list[str]) -> None:
    from wds_cloud.pytorch.builder import ReadAhead

    plain = torch.utils.data.DataLoader(list(range(10)), batch_size=4)
    ahead = ReadAhead(plain, lambda b: b)
    assert [b.tolist() for b in ahead] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    untracked = _resume_loader(shard_urls)
    untracked.resumable = False
    ahead = ReadAhead(untracked, lambda b: b)
    next(iter(ahead))
    with pytest.raises(ConfigError, match="resumable=False"):
        ahead.state()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_device_prefetcher_on_cuda_resumes_exactly(shard_urls: list[str]) -> None:
    import json

    first = _resume_loader(shard_urls, device="cuda", pin_memory=True)
    seen: list[int] = []
    for step, (images, labels) in enumerate(first, 1):
        assert images.is_cuda
        seen += labels.cpu().tolist()
        if step == 3:
            state = json.loads(json.dumps(first.state_dict()))
            break
    rest = _resume_loader(shard_urls, device="cuda")
    rest.load_state_dict(state)
    seen += _labels(rest)
    assert sorted(seen) == list(range(TOTAL))
