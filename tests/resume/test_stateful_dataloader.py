"""torchdata's ``StatefulDataLoader`` over a resumable dataset: the loader's own
``state_dict()`` (taken mid-epoch, through JSON) resumes the epoch exactly, with and without
workers, for ``WebDataset`` and a hand-built ``DataPipeline``."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import wds_cloud as wds
from tests.resume.helpers import assert_exactly_once, keys_of_batch, write_shards
from wds_cloud.errors import ConfigError
from wds_cloud.resume import merge_states

stateful_dataloader = pytest.importorskip("torchdata.stateful_dataloader")
StatefulDataLoader = stateful_dataloader.StatefulDataLoader

pytestmark = pytest.mark.slow

BATCH = 8


def _webdataset(urls: list[str]) -> Any:
    return (
        wds.WebDataset(urls, shardshuffle=True, seed=17)
        .shuffle(100)
        .decode()
        .to_tuple("txt", "cls")
    )


def _datapipeline(urls: list[str]) -> Any:
    return wds.DataPipeline(
        wds.SimpleShardList(urls),
        wds.shuffle_shards(seed=17),
        wds.split_by_worker,
        wds.tarfile_to_samples(),
        wds.shuffle(100),
        wds.decode(),
        wds.to_tuple("txt", "cls"),
    )


def _mix(urls: list[str]) -> Any:
    """A RandomMix of two shuffled datasets under a shuffle (each worker mixes its shares)."""
    sets = [
        wds.WebDataset(part, shardshuffle=True, seed=i).shuffle(20).decode().to_tuple("txt", "cls")
        for i, part in enumerate((urls[:3], urls[3:]))
    ]
    return wds.DataPipeline(wds.RandomMix(sets, [0.7, 0.3], longest=True, seed=3)).shuffle(10)


def _run(
    make: Callable[[], Any], stops: list[int], **loader_kw: Any
) -> tuple[list[str], list[str]]:
    """Iterate a StatefulDataLoader; after each number of batches in ``stops`` take its state
    (through JSON), drop it and go on with a new loader from that state. Returns the keys
    delivered (up to each state, then the rest of the epoch) and those of the next epoch."""
    delivered: list[str] = []
    state = None
    for stop in [*stops, None]:
        loader = StatefulDataLoader(make(), batch_size=BATCH, **loader_kw)
        if state is not None:
            loader.load_state_dict(state)
        for n, batch in enumerate(loader, 1):
            delivered.extend(keys_of_batch(batch))
            if n == stop:
                state = json.loads(json.dumps(loader.state_dict()))
                break
    nxt = [k for batch in loader for k in keys_of_batch(batch)]
    return delivered, nxt


LOADERS = {
    "in-process": {"num_workers": 0},
    "2-workers": {"num_workers": 2},
    # batches prefetched by the workers but not yet yielded are not in the state
    "persistent-prefetch-4": {"num_workers": 2, "persistent_workers": True, "prefetch_factor": 4},
}


@pytest.mark.parametrize("kind", list(LOADERS))
@pytest.mark.parametrize(
    "make", [_webdataset, _datapipeline, _mix], ids=["webdataset", "pipeline", "mix"]
)
def test_stateful_dataloader_exactly_once(
    tmp_path: Path, make: Callable[[list[str]], Any], kind: str
) -> None:
    urls, keys = write_shards(tmp_path, 6, 30)  # 180 samples, 23 batches
    delivered, nxt = _run(lambda: make(urls), [5, 3, 7], **LOADERS[kind])
    assert_exactly_once(delivered, keys)
    assert_exactly_once(nxt, keys)


def test_snapshot_every_n_steps_at_a_snapshot_step(tmp_path: Path) -> None:
    """With ``snapshot_every_n_steps=n`` the workers' states are taken every n batches; a
    loader state taken at such a step is exact."""
    urls, keys = write_shards(tmp_path, 6, 30)
    delivered, _ = _run(lambda: _webdataset(urls), [6, 9], num_workers=2, snapshot_every_n_steps=3)
    assert_exactly_once(delivered, keys)


def _state_at(loader: Any, stop: int) -> tuple[list[str], dict[str, Any]]:
    """Keys of the first ``stop`` batches and the loader state then (through JSON)."""
    delivered: list[str] = []
    for n, batch in enumerate(loader, 1):
        delivered.extend(keys_of_batch(batch))
        if n == stop:
            break
    return delivered, json.loads(json.dumps(loader.state_dict()))


@pytest.mark.parametrize("stop", [9, 11])
def test_worker_that_finished_its_share(tmp_path: Path, stop: int) -> None:
    """3 shards, 2 workers: worker 1 (one shard) is done after 8 of its batches; its state says
    so, and the resumed worker 1 delivers nothing more in this epoch (not the next epoch's
    share), while worker 0 finishes its two shards."""
    urls, keys = write_shards(tmp_path, 3, 30)
    loader = StatefulDataLoader(_webdataset(urls), batch_size=BATCH, num_workers=2)
    before, state = _state_at(loader, stop)
    workers = state["_snapshot"]["_worker_snapshots"]
    assert [w["dataset_state"].get("finished", False) for w in workers.values()] == [False, True]
    again = StatefulDataLoader(_webdataset(urls), batch_size=BATCH, num_workers=2)
    again.load_state_dict(state)
    assert_exactly_once(before + [k for b in again for k in keys_of_batch(b)], keys)


@pytest.mark.parametrize("workers", [0, 3])
def test_merged_worker_states_resume_with_other_workers(tmp_path: Path, workers: int) -> None:
    """``merge_states`` turns a StatefulDataLoader state (one state per worker) into a global
    state; loaded into the dataset, any worker count resumes it."""
    urls, keys = write_shards(tmp_path, 5, 30)  # worker 1: 2 shards, done after step 16
    loader = StatefulDataLoader(_webdataset(urls), batch_size=BATCH, num_workers=2)
    before, state = _state_at(loader, 17)
    merged = merge_states([state])
    readers = [w["dataset_state"] for w in state["_snapshot"]["_worker_snapshots"].values()]
    assert merge_states(readers[::-1]) == merged  # in any order (one reader has finished)
    assert "finished" not in merged
    dataset = _webdataset(urls)
    dataset.load_state_dict(merged)
    again = StatefulDataLoader(dataset, batch_size=BATCH, num_workers=workers)
    assert_exactly_once(before + [k for b in again for k in keys_of_batch(b)], keys)


def test_state_between_snapshots_is_refused_by_merge(tmp_path: Path) -> None:
    urls, _ = write_shards(tmp_path, 3, 30)
    loader = StatefulDataLoader(
        _webdataset(urls), batch_size=BATCH, num_workers=2, snapshot_every_n_steps=4
    )
    _, state = _state_at(loader, 6)
    assert state["_steps_since_snapshot"] == 2
    with pytest.raises(ConfigError, match="2 batch\\(es\\) after its workers' last snapshot"):
        merge_states([state])


def test_worker_state_in_another_reader_is_refused(tmp_path: Path) -> None:
    """A worker's state names its reader; loaded anywhere else it is refused (a failed
    StatefulDataLoader worker takes torchdata 5 s per worker to shut down, so the check is
    made on the dataset: it is the same ``load_state_dict``/``iter`` a worker runs)."""
    urls, _ = write_shards(tmp_path, 4, 30)
    loader = StatefulDataLoader(_webdataset(urls), batch_size=BATCH, num_workers=2)
    _, state = _state_at(loader, 3)
    worker_1 = state["_snapshot"]["_worker_snapshots"]["worker_1"]["dataset_state"]
    assert worker_1["reader"] == [0, 1, 1, 2]
    dataset = _webdataset(urls)
    dataset.load_state_dict(worker_1)
    with pytest.raises(ConfigError, match=r"\(0, 1, 1, 2\) was loaded into reader \(0, 1, 0, 1\)"):
        iter(dataset)


@pytest.mark.parametrize("stop", [1, 2])
def test_persistent_workers_second_epoch(tmp_path: Path, stop: int) -> None:
    """In the second epoch of persistent workers, a worker that has not yielded a batch yet is
    in the new epoch (its state is not the finished previous epoch's)."""
    urls, keys = write_shards(tmp_path, 6, 30)
    kw = {"batch_size": BATCH, "num_workers": 2, "persistent_workers": True}
    loader = StatefulDataLoader(_webdataset(urls), **kw)
    first = [k for b in loader for k in keys_of_batch(b)]
    before, state = _state_at(loader, stop)
    again = StatefulDataLoader(_webdataset(urls), **kw)
    again.load_state_dict(state)
    second = before + [k for b in again for k in keys_of_batch(b)]
    assert_exactly_once(second, keys)
    assert second[:BATCH] != first[:BATCH]  # epoch 1's shard order, not epoch 0's


def test_unresumable_pipeline_runs_and_its_state_is_refused(tmp_path: Path) -> None:
    """StatefulDataLoader asks the workers' datasets for their state whether or not the loop
    saves one: a pipeline that cannot be resumed still runs; its state is refused on load."""
    urls, _ = write_shards(tmp_path, 4, 30)

    def make() -> Any:
        return wds.DataPipeline(
            wds.SimpleShardList(urls),
            wds.split_by_worker,
            _custom_shard_stage,
            wds.tarfile_to_samples(),
            wds.to_tuple("txt"),
        )

    loader = StatefulDataLoader(make(), batch_size=BATCH, num_workers=2)
    assert sum(len(keys_of_batch(b)) for b in loader) == 120
    _, state = _state_at(loader, 3)
    worker_0 = state["_snapshot"]["_worker_snapshots"]["worker_0"]["dataset_state"]
    why = "saved by a pipeline that cannot be resumed: .*custom shard stages"
    with pytest.raises(ConfigError, match=why):
        make().load_state_dict(worker_0)  # what the resumed worker does
    with pytest.raises(ConfigError, match="custom shard stages"):
        merge_states([state])
    in_process = StatefulDataLoader(make(), batch_size=BATCH, num_workers=0)
    next(iter(in_process))
    with pytest.raises(ConfigError, match="custom shard stages"):
        in_process.state_dict()


def _custom_shard_stage(src: Any) -> Any:
    """A shard stage resume does not know (so the pipeline cannot be resumed)."""
    yield from src


def test_merged_mix_worker_states_other_numbers_refused(tmp_path: Path) -> None:
    """A RandomMix's per-worker states merge into one state of 2 mixers; each mixer continues
    its own draws, so loading it where the mix runs with other numbers is refused."""
    urls, _ = write_shards(tmp_path, 6, 30)
    loader = StatefulDataLoader(_mix(urls), batch_size=BATCH, num_workers=2)
    _, state = _state_at(loader, 4)
    merged = merge_states([state])
    assert sorted(merged["mixers"]) == ["0.0", "0.1"] and merged["readers"] == [1, 2]
    dataset = _mix(urls)
    dataset.load_state_dict(merged)
    with pytest.raises(ConfigError, match=r"\(1, 2\) and is loaded with \(1, 1\)"):
        next(iter(dataset))
