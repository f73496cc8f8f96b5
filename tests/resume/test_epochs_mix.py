"""Resume of with_epoch/repeat windows, resampled shards, RandomMix and split_samples.

Each test compares runs interrupted at random points (the state through JSON, a new pipeline
object loading it) with one uninterrupted run of the same seed."""

from __future__ import annotations

import itertools
import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import wds_cloud as wds
from tests.resume.helpers import (
    assert_exactly_once,
    key_of,
    keys_of_batch,
    random_stops,
    run_interrupted,
    write_shards,
)
from wds_cloud.errors import ConfigError

Keys = Callable[[Any], list[str]]


def _one(item: Any) -> list[str]:
    return [key_of(item)]


def _finished(state: dict[str, Any]) -> bool:
    return bool(state.get("finished") or state.get("mix", {}).get("finished"))


def run_windows(
    make: Callable[[], Any], windows: int, stops: list[int], keys_of: Keys = _one
) -> tuple[list[str], list[dict[str, Any]]]:
    """Keys of ``windows`` consecutive ``iter()`` calls; after the ``n``-th item for ``n`` in
    ``stops`` the state goes through JSON into a new ``make()`` that continues."""
    stops = sorted(set(stops))
    out: list[str] = []
    states: list[dict[str, Any]] = []
    obj, n, done = make(), 0, 0
    while done < windows:
        for item in obj:
            out.extend(keys_of(item))
            n += 1
            if stops and n == stops[0]:
                stops.pop(0)
                state = json.loads(json.dumps(obj.state_dict()))
                states.append(state)
                obj = make()
                obj.load_state_dict(state)
                done += _finished(state)
                break
        else:
            done += 1
    return out, states


@pytest.fixture(scope="module")
def shards(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[str], list[str]]:
    return write_shards(tmp_path_factory.mktemp("shards"), 5, 12)


# -- with_epoch / repeat ---------------------------------------------------------------------


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_with_epoch_spanning_passes_resumes_exactly(
    shards: tuple[list[str], list[str]], seed: int
) -> None:
    urls, keys = shards
    n = len(keys) * 3 // 2 + 1  # a window is a pass and a half: the next starts a new pass

    def make() -> Any:
        return wds.WebDataset(urls, shardshuffle=True, seed=seed).to_tuple("txt").with_epoch(n)

    plain, _ = run_windows(make, 3, [])
    assert len(plain) == 3 * n
    got, states = run_windows(make, 3, random_stops(seed, 8, 3 * n))
    assert got == plain
    assert len(states) == 8 and all(len(json.dumps(s)) < 2000 for s in states)
    assert {s["pass"] for s in states if not _finished(s)} <= {0, 1}


def test_with_epoch_of_batches_and_repeat(shards: tuple[list[str], list[str]]) -> None:
    urls, keys = shards

    def batches() -> Any:
        return wds.WebDataset(urls, shardshuffle=True, seed=4).to_tuple("txt").batched(7)

    plain, _ = run_windows(lambda: batches().with_epoch(nbatches=20), 2, [], keys_of_batch)
    got, _ = run_windows(
        lambda: batches().with_epoch(nbatches=20), 2, random_stops(4, 6, 40), keys_of_batch
    )
    assert got == plain
    plain, _ = run_windows(lambda: batches().repeat(3), 2, [], keys_of_batch)
    assert Counter(plain) == Counter({k: 6 for k in keys})
    got, _ = run_windows(lambda: batches().repeat(3), 2, random_stops(5, 6, 54), keys_of_batch)
    assert got == plain


@pytest.mark.parametrize("seed", [6, 7])
def test_windows_of_whole_passes_with_buffers(
    shards: tuple[list[str], list[str]], seed: int
) -> None:
    """Shuffle buffers reorder what follows a resume, but each pass of a window is delivered
    exactly once and the windows' contents are those of the uninterrupted run."""
    urls, keys = shards
    n = 2 * len(keys)

    def make() -> Any:
        ds = wds.WebDataset(urls, shardshuffle=True, seed=seed).shuffle(15).to_tuple("txt")
        return ds.batched(3).unbatched().shuffle(10).with_epoch(n)

    plain, _ = run_windows(make, 2, [])
    got, _ = run_windows(make, 2, random_stops(seed, 6, 2 * n))
    for w in range(2):
        window = got[w * n : (w + 1) * n]
        assert Counter(window) == Counter(plain[w * n : (w + 1) * n])
        assert Counter(window) == Counter({k: 2 for k in keys})


def test_with_epoch_wrapper_continues_its_dataset(shards: tuple[list[str], list[str]]) -> None:
    """``wds.with_epoch(dataset, n)`` keeps its dataset's stream between passes: the state is
    the pass's count and the dataset's own state."""
    urls, keys = shards

    def make() -> Any:
        ds = wds.WebDataset(urls, shardshuffle=True, seed=2).to_tuple("txt")
        return wds.with_epoch(ds, 25)

    plain, _ = run_windows(make, 6, [])
    assert len(plain) == 150
    assert Counter(plain[:120]) == Counter({k: 2 for k in keys})  # two passes and a half
    for seed in (1, 2):
        got, states = run_windows(make, 6, random_stops(seed, 6, 150))
        assert got == plain
        assert all(0 < s["window"] <= 25 for s in states)
    with pytest.raises(ConfigError, match="has no state_dict"):
        wds.with_epoch([1, 2, 3], 2).state_dict()


# -- resampled=True --------------------------------------------------------------------------


@pytest.mark.parametrize("seed", [3, 8])
def test_resampled_with_epoch_same_draws(shards: tuple[list[str], list[str]], seed: int) -> None:
    urls, _ = shards

    def make() -> Any:
        return wds.WebDataset(urls, resampled=True, seed=seed).to_tuple("txt").with_epoch(50)

    plain, _ = run_windows(make, 3, [])
    got, states = run_windows(make, 3, random_stops(seed, 8, 150))
    assert got == plain
    live = [s for s in states if not _finished(s)]
    assert live and all(set(s["draws"]) == {"0.0"} for s in live)
    assert all(len(json.dumps(s)) < 2000 for s in states)


def test_resampled_draws_with_buffers(shards: tuple[list[str], list[str]]) -> None:
    """A finite resampled pass through shuffle buffers: the same draws, every sample of every
    draw delivered once (a shard drawn twice gives its samples twice)."""
    urls, _ = shards

    def make() -> Any:
        return wds.DataPipeline(
            wds.ResampledShards(urls, nshards=9, seed=11, deterministic=True),
            wds.tarfile_to_samples(),
            wds.shuffle(25),
            wds.to_tuple("txt"),
        )

    plain = [key_of(s) for s in make()]
    assert max(Counter(plain).values()) > 1  # some shard was drawn twice
    for seed in (1, 2, 3):
        got, _ = run_interrupted(make, random_stops(seed, 3, 30))
        assert Counter(got) == Counter(plain)


def test_resampled_states_of_two_ranks_merge(
    shards: tuple[list[str], list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ranks draw different shards; their states merged (the documented merge_states) into one
    resume each rank exactly."""
    from wds_cloud.resume import merge_states

    urls, _ = shards
    monkeypatch.setenv("WORLD_SIZE", "2")

    def make() -> Any:
        return wds.WebDataset(urls, resampled=True, seed=4).to_tuple("txt")

    plain, states, heads = [], [], []
    for rank, stop in ((0, 17), (1, 26)):
        monkeypatch.setenv("RANK", str(rank))
        plain.append([key_of(s) for s in itertools.islice(make(), 60)])
        ds = make()
        heads.append([key_of(s) for s in itertools.islice(ds, stop)])
        states.append(json.loads(json.dumps(ds.state_dict())))
    assert plain[0] != plain[1]
    merged = merge_states(states)
    assert set(merged["draws"]) == {"0.0", "1.0"}
    for rank in (0, 1):
        monkeypatch.setenv("RANK", str(rank))
        ds = make()
        ds.load_state_dict(merged)
        got = heads[rank] + [key_of(s) for s in itertools.islice(ds, 60 - len(heads[rank]))]
        assert got == plain[rank]


# -- RandomMix -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def two_sets(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[str], list[str]]:
    a, _ = write_shards(tmp_path_factory.mktemp("a"), 3, 10)
    b, _ = write_shards(tmp_path_factory.mktemp("b"), 13, 4)
    return a, b[10:]  # shards s010..s012 of 4 samples: the key prefix tells the source


def _source(key: str) -> str:
    return "b" if int(key[1:4]) >= 10 else "a"


@pytest.mark.parametrize("longest", [False, True])
def test_random_mix_same_draws(two_sets: tuple[list[str], list[str]], longest: bool) -> None:
    a, b = two_sets

    def make(buffer: int = 0) -> Any:
        dsa = wds.WebDataset(a, shardshuffle=True, seed=1).shuffle(buffer).to_tuple("txt")
        dsb = wds.WebDataset(b, shardshuffle=True, seed=2).to_tuple("txt")
        return wds.RandomMix([dsa, dsb], [0.6, 0.4], longest=longest, seed=5)

    plain, _ = run_windows(make, 2, [])
    total = len(plain)
    for seed in (1, 2):
        got, states = run_windows(make, 2, random_stops(seed, 5, total))
        assert got == plain
        assert all(len(s["datasets"]) == 2 for s in states)
    buffered, _ = run_windows(lambda: make(12), 2, [])
    first = len(list(make(12)))
    for seed in (3, 4):
        got, _ = run_windows(lambda: make(12), 2, random_stops(seed, 5, total))
        assert [_source(k) for k in got] == [_source(k) for k in buffered]  # the same draws
        if longest:  # every sample of both datasets, each mix epoch
            assert Counter(got) == Counter(buffered)
        else:  # the mix stops inside a pass of a: which of its samples came first differs
            assert max(Counter(got[:first]).values()) == max(Counter(got[first:]).values()) == 1


def test_random_mix_refusals(two_sets: tuple[list[str], list[str]]) -> None:
    a, b = two_sets
    mix = wds.RandomMix([wds.WebDataset(a), wds.WebDataset(b)])
    with pytest.raises(ConfigError, match="seed="):
        mix.state_dict()
    inside = wds.DataPipeline(wds.RandomMix([wds.WebDataset(a), wds.WebDataset(b)], seed=1))
    assert inside.state_dict()["mixers"] == {}  # resumable (tests/resume/test_mix_pipeline.py)
    with pytest.raises(ConfigError, match="RandomMix state loads only"):
        inside.load_state_dict(wds.WebDataset(a).state_dict())
    mix = wds.RandomMix([wds.WebDataset(a), wds.WebDataset(b)], seed=1)
    with pytest.raises(ConfigError, match="2 datasets and seed 1; this RandomMix has 3"):
        wds.RandomMix([wds.WebDataset(a)] * 3, seed=1).load_state_dict(mix.state_dict())


# -- split_samples ---------------------------------------------------------------------------


def test_split_samples_single_process(shards: tuple[list[str], list[str]]) -> None:
    urls, keys = shards
    delivered, _ = run_interrupted(
        lambda: wds.WebDataset(urls, split_samples=True).to_tuple("txt"), [5, 23, 9]
    )
    assert delivered == keys


# -- DataLoader workers ----------------------------------------------------------------------


def _batch_keys(batch: Any) -> list[str]:
    return [t[0].decode() for t in batch]


def _loader(ds: Any, nbatches: int, persistent: bool = False) -> Any:
    # an outer batch is one inner batch of each worker, so a state never splits one
    loader = wds.WebLoader(
        ds.to_tuple("txt").batched(3),
        num_workers=2,
        batch_size=None,
        persistent_workers=persistent,
    )
    return loader.unbatched().batched(6, collation_fn=list).with_epoch(nbatches=nbatches)


@pytest.mark.slow
def test_loader_with_epoch_of_whole_passes(tmp_path: Path) -> None:
    """A window of two passes through two workers: each pass exactly once (the work left is
    spread over the workers anew, so the order after a resume differs)."""
    urls, keys = write_shards(tmp_path, 6, 8)  # 3 shards a worker: 8 batches a pass

    def make() -> Any:
        return _loader(wds.WebDataset(urls, shardshuffle=True, seed=3), 16)

    got, states = run_windows(make, 2, [4, 9, 15, 21], _batch_keys)
    assert [s["pass"] for s in states] == [0, 1, 1, 0]
    for w in range(2):
        assert Counter(got[w * 96 : (w + 1) * 96]) == Counter({k: 2 for k in keys})


@pytest.mark.slow
@pytest.mark.parametrize("persistent", [False, True])
def test_loader_resampled_same_draws(tmp_path: Path, persistent: bool) -> None:
    """Each worker draws its own shards: after a resume every worker goes on with its draws,
    so the delivered sequence is the uninterrupted one (persistent workers draw a new epoch
    each window, the others the same draws again)."""
    urls, _ = write_shards(tmp_path, 6, 8)

    def make() -> Any:
        return _loader(wds.WebDataset(urls, resampled=True, seed=3), 7, persistent)

    plain, _ = run_windows(make, 2, [], _batch_keys)
    assert (plain[:42] != plain[42:]) is persistent
    got, states = run_windows(make, 2, [2, 5, 10], _batch_keys)
    assert got == plain
    assert {r for s in states if not _finished(s) for r in s["draws"]} == {"0.0", "0.1"}


@pytest.mark.slow
def test_loader_split_samples_exactly_once(tmp_path: Path) -> None:
    urls, keys = write_shards(tmp_path, 3, 10)

    def make() -> Any:
        ds = wds.WebDataset(urls, split_samples=True).shuffle(5).to_tuple("txt").batched(3)
        loader = wds.WebLoader(ds, num_workers=2, batch_size=None).unbatched().shuffle(7)
        return loader.batched(4, collation_fn=list)

    delivered, _ = run_interrupted(make, [2, 3, 1], _batch_keys)
    assert_exactly_once(delivered, keys)
