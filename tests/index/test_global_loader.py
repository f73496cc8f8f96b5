"""``make_loader(order="global")`` in one process: the batches of the global order, decoded and
collated in the workers, the same with or without workers; epochs; exact resume; refusals."""

from __future__ import annotations

import json
from typing import Any

import pytest

import wds_cloud as wds
from tests.resume.helpers import assert_exactly_once, run_interrupted, write_shards
from wds_cloud.errors import ConfigError
from wds_cloud.index.globalorder import GlobalOrder

BATCH = 8


@pytest.fixture(scope="module")
def indexed(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, list[str]]:
    """5 local shards of 20 samples, indexed; (dataset JSON, keys)."""
    tmp = tmp_path_factory.mktemp("global-loader")
    urls, keys = write_shards(tmp, 5, 20)
    wds.build_index(urls, json=str(tmp / "index.json"))
    return str(tmp / "index.json"), keys


def keys_of(batch: list[tuple[str, int]]) -> list[str]:
    return [key for key, _ in batch]


def make(json_url: str, workers: int = 0, **kw: Any) -> Any:
    return wds.make_loader(
        json_url,
        order="global",
        batch_size=BATCH,
        num_workers=workers,
        seed=11,
        to_tuple=("txt", "cls"),
        map=lambda s: (s[0].decode(), int(s[1])),
        collate=list,
        **kw,
    )


@pytest.mark.parametrize("workers", [0, 2])
def test_batches_are_the_global_order(indexed: tuple[str, list[str]], workers: int) -> None:
    json_url, keys = indexed
    ds = wds.IndexedWebDataset(json_url)
    want = [s["__key__"] for batch in GlobalOrder(ds, BATCH, seed=11) for s in batch]
    loader = make(json_url, workers)
    assert len(loader) == -(-len(keys) // BATCH)
    batches = list(loader)
    assert [k for b in batches for k in keys_of(b)] == want
    assert all(cls == int(k[-5:]) % 7 for b in batches for k, cls in b)  # decoded in the workers
    assert_exactly_once(want, keys)
    state = loader.state_dict()
    assert (state["epoch"], state["cursor"], state["world"]) == (1, 0, 1)
    second = [k for b in loader for k in keys_of(b)]  # the next iter() is the next epoch
    assert sorted(second) == sorted(keys) and second != want


def test_default_collation_makes_tensors(indexed: tuple[str, list[str]]) -> None:
    import torch

    json_url, _ = indexed
    loader = wds.make_loader(
        json_url,
        order="global",
        batch_size=4,
        num_workers=0,
        to_tuple="cls",
        map=lambda s: (int(s[0]),),
    )
    (labels,) = next(iter(loader))
    assert isinstance(labels, torch.Tensor)
    assert labels.shape == (4,) and not labels.dtype.is_floating_point


def test_resume_in_process(indexed: tuple[str, list[str]]) -> None:
    json_url, keys = indexed
    whole = [k for b in make(json_url) for k in keys_of(b)]
    delivered, states = run_interrupted(lambda: make(json_url, 2), [3, 4, 2], keys_of)
    assert delivered == whole
    assert_exactly_once(delivered, keys)
    assert [s["cursor"] for s in states] == [24, 56, 72]
    assert all(len(json.dumps(s)) < 120 for s in states)


def test_set_epoch(indexed: tuple[str, list[str]]) -> None:
    json_url, _ = indexed
    loader = make(json_url)
    loader.set_epoch(3)
    third = [k for b in loader for k in keys_of(b)]
    other = make(json_url)
    other.load_state_dict({**other.state_dict(), "epoch": 3, "cursor": 40})
    other.set_epoch(3)  # the same epoch: the cursor stays
    assert [k for b in other for k in keys_of(b)] == third[40:]


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"order": "random"}, "order must be 'stream' or 'global'"),
        ({"order": "global", "epoch_size": 10}, "epoch_size, resampled and inner_batch"),
        ({"order": "global", "nodesplitter": None}, "nodesplitter only apply to streaming"),
        (
            {"order": "global", "workersplitter": None, "empty_check": False},
            "workersplitter, empty_check only apply",
        ),
        ({"order": "global", "resampled": True}, "epoch_size, resampled and inner_batch"),
        ({"order": "global", "uneven": "wrap"}, "uneven must be 'drop' or 'pad'"),
    ],
)
def test_refusals(indexed: tuple[str, list[str]], kw: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        wds.make_loader(indexed[0], batch_size=4, num_workers=0, **kw)


def test_a_streaming_state_is_refused(indexed: tuple[str, list[str]]) -> None:
    with pytest.raises(ConfigError, match="not a global-order state"):
        make(indexed[0]).load_state_dict({"format": "wds_cloud.resume/1", "epoch": 0})


def test_read_ahead_state_is_the_loaders_at_the_same_step(indexed: tuple[str, list[str]]) -> None:
    """``DevicePrefetcher``'s one-batch-ahead loop (``ReadAhead``, what runs on CUDA) gives
    the state of the batch it handed out, although it has read one more from the loader."""
    from wds_cloud.pytorch.builder import ReadAhead

    json_url, keys = indexed
    plain = make(json_url, 2)
    for step, _ in enumerate(plain, 1):
        if step == 4:
            want = plain.state_dict()
            break
    ahead = ReadAhead(make(json_url, 2), lambda batch: batch)
    before = []
    for step, batch in enumerate(ahead, 1):
        before += keys_of(batch)
        if step == 4:
            state = ahead.state()
            break
    assert state == want and state["cursor"] == 4 * BATCH
    rest = make(json_url)
    rest.load_state_dict(state)
    assert_exactly_once(before + [k for b in rest for k in keys_of(b)], keys)


@pytest.mark.parametrize("workers", [0, 2])
def test_a_loop_left_early_goes_on_at_the_next_iter(
    indexed: tuple[str, list[str]], workers: int
) -> None:
    """Leaving the loop early (the thread pool or the persistent workers still reading
    ahead) and iterating the same loader again continues from the batch after the last one
    handed out."""
    json_url, keys = indexed
    whole = [k for b in make(json_url) for k in keys_of(b)]
    loader = make(json_url, workers, persistent_workers=workers > 0)
    got: list[str] = []
    for stop in (2, 5):
        for step, batch in enumerate(loader, 1):
            got += keys_of(batch)
            if step == stop:
                break
    got += [k for b in loader for k in keys_of(b)]
    assert got == whole
    assert_exactly_once(got, keys)
