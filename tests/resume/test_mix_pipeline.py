"""RandomMix read through a pipeline or a DataLoader: every stopping point against an
uninterrupted run (``wds_cloud.resume.mixing``)."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest

import wds_cloud as wds
from tests.resume.helpers import key_of, keys_of_batch, random_stops, write_shards
from tests.resume.test_epochs_mix import run_windows
from wds_cloud.errors import ConfigError


@pytest.fixture(scope="module")
def sets(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[str], list[str], list[str]]:
    a, ka = write_shards(tmp_path_factory.mktemp("a"), 4, 9)
    b, kb = write_shards(tmp_path_factory.mktemp("b"), 14, 4)
    return a, b[10:], ka + kb[40:]  # b: shards s010..s013


def _mix(a: list[str], b: list[str], longest: bool, inside: int = 0, **kw: Any) -> Any:
    dsa = wds.WebDataset(a, shardshuffle=True, seed=1, **kw).shuffle(inside).to_tuple("txt")
    dsb = wds.WebDataset(b, shardshuffle=True, seed=2, **kw).to_tuple("txt")
    return wds.RandomMix([dsa, dsb], [0.6, 0.4], longest=longest, seed=5)


def _batch_keys(batch: Any) -> list[str]:
    return [t[0].decode() for t in batch]


def run_passes(
    make: Any, passes: int, stops: list[int], keys_of: Any = None
) -> tuple[list[list[str]], list[dict[str, Any]]]:
    """Keys of each of ``passes`` consecutive ``iter()`` calls; after the ``n``-th item (over
    all passes) for ``n`` in ``stops`` the state goes through JSON into a new ``make()``."""
    keys_of = keys_of or (lambda item: [key_of(item)])
    stops = sorted(set(stops))
    out: list[list[str]] = [[]]
    states: list[dict[str, Any]] = []
    obj, n = make(), 0
    while len(out) <= passes:
        for item in obj:
            out[-1].extend(keys_of(item))
            n += 1
            if stops and n == stops[0]:
                stops.pop(0)
                state = json.loads(json.dumps(obj.state_dict()))
                states.append(state)
                obj = make()
                obj.load_state_dict(state)
                break
        else:
            out.append([])
    return out[:passes], states


def _passes(got: list[list[str]]) -> list[Counter[str]]:
    return [Counter(p) for p in got]


@pytest.mark.parametrize("longest", [False, True])
@pytest.mark.parametrize("buffer", [0, 9])
def test_pipeline_over_mix(
    sets: tuple[list[str], list[str], list[str]], longest: bool, buffer: int
) -> None:
    """``DataPipeline(RandomMix(...)).shuffle(buffer)``: without a buffer the resumed run is
    the uninterrupted one; with one, the same samples in each pass (each exactly once)."""
    a, b, keys = sets

    def make() -> Any:
        return wds.DataPipeline(_mix(a, b, longest)).shuffle(buffer)

    plain, _ = run_passes(make, 3, [])
    if longest:
        assert _passes(plain) == [Counter(keys)] * 3
    assert plain[0] != plain[1]  # the epochs advance
    total = sum(map(len, plain))
    for seed in (1, 2, 3):
        got, states = run_passes(make, 3, random_stops(seed, 6, total))
        assert all("mixers" in s for s in states)
        if buffer == 0:
            assert got == plain
        else:  # the same samples in each pass, each once
            assert _passes(got) == _passes(plain)
            assert all(max(c.values()) == 1 for c in _passes(got))


def test_buffers_inside_and_after_the_mix(sets: tuple[list[str], list[str], list[str]]) -> None:
    """A shuffle inside a dataset and one after the mix, nested pipelines, stops one after the
    other: each pass exactly once."""
    a, b, keys = sets

    def make() -> Any:
        inner = wds.DataPipeline(_mix(a, b, True, inside=6)).shuffle(5)
        return wds.DataPipeline(inner).shuffle(4)

    for seed in (4, 5):
        got, states = run_passes(make, 2, random_stops(seed, 6, 2 * len(keys)))
        assert _passes(got) == [Counter(keys), Counter(keys)]
        assert any(any(m["left"] != [[], []] for m in s["mixers"].values()) for s in states)


def test_resampled_datasets_lazy_stages(sets: tuple[list[str], list[str], list[str]]) -> None:
    """Resampled datasets under lazy stages: the same draws and samples after each resume."""
    a, b, _ = sets

    def make() -> Any:
        return wds.DataPipeline(_mix(a, b, True, resampled=True)).batched(3)

    plain, _ = run_windows(make_first_n(make, 9), 1, [], keys_of_batch)
    assert len(plain) == 27
    got, states = run_windows(make_first_n(make, 9), 1, [2, 5, 7], keys_of_batch)
    assert got == plain
    assert all(s["datasets"][0]["pulled"]["resampled"] for s in states)


def make_first_n(make: Any, n: int) -> Any:
    """``make`` with one pass cut after ``n`` items (resampled passes are endless)."""

    class First:
        def __init__(self) -> None:
            self.obj = make()
            self.count = 0

        def __iter__(self) -> Any:
            for item in self.obj:
                if self.count >= n:
                    return
                self.count += 1
                yield item

        def state_dict(self) -> Any:
            return dict(self.obj.state_dict(), count=self.count)

        def load_state_dict(self, state: Any) -> None:
            self.count = state["count"]
            self.obj.load_state_dict(state)

    return First


@pytest.mark.slow
@pytest.mark.parametrize(
    ("workers", "persistent"), [(0, False), (2, False), (2, True)], ids=["0", "2", "2p"]
)
@pytest.mark.parametrize("longest", [False, True])
def test_loader_over_mix(
    sets: tuple[list[str], list[str], list[str]], workers: int, persistent: bool, longest: bool
) -> None:
    """``WebLoader(DataPipeline(RandomMix(...)).batched(3)).unbatched().shuffle(7)``: every
    worker mixes its share; each pass exactly once."""
    a, b, keys = sets

    def make(shuffle: int = 7, outer: int = 4) -> Any:
        ds = wds.DataPipeline(_mix(a, b, longest)).batched(3)
        loader = wds.WebLoader(
            ds, num_workers=workers, batch_size=None, persistent_workers=persistent
        )
        return loader.unbatched().shuffle(shuffle).batched(outer, collation_fn=list)

    plain, _ = run_passes(make, 3, [], _batch_keys)
    assert plain[0] != plain[1]  # the epochs advance
    if longest:
        assert _passes(plain) == [Counter(keys)] * 3
    total = sum(map(len, plain)) // 4
    for seed in (6, 7):
        got, states = run_passes(make, 3, random_stops(seed, 6, total), _batch_keys)
        assert _passes(got) == _passes(plain)
        assert all(max(c.values()) == 1 for c in _passes(got))
        assert {r for s in states for r in s["mixers"]} <= {"0.0", "0.1"}
    if workers == 0:  # one mixer, an outer batch is an inner one: the uninterrupted sequence
        plain, _ = run_passes(lambda: make(0, 3), 2, [], _batch_keys)
        got, _ = run_passes(lambda: make(0, 3), 2, [3, 8, 11, 20], _batch_keys)
        assert got == plain


@pytest.mark.parametrize("workers", [0, 2])
def test_loader_whose_dataset_is_the_mix(
    sets: tuple[list[str], list[str], list[str]], workers: int
) -> None:
    """A RandomMix that is itself the loader's dataset (an ``IterableDataset`` subclass, as
    torch needs): each worker's mix emits through ``resume.tracked.emit_mix``; every stop
    resumes each pass exactly once, with the uninterrupted run's samples."""
    import torch.utils.data

    class MixDataset(wds.RandomMix, torch.utils.data.IterableDataset):  # type: ignore[misc]
        pass

    a, b, keys = sets

    def make() -> Any:
        dsa = wds.WebDataset(a, shardshuffle=True, seed=1).to_tuple("txt")
        dsb = wds.WebDataset(b, shardshuffle=True, seed=2).to_tuple("txt")
        mix = MixDataset([dsa, dsb], [0.6, 0.4], longest=True, seed=5)
        return wds.WebLoader(mix, num_workers=workers, batch_size=None)

    plain, _ = run_passes(make, 2, [])
    assert _passes(plain) == [Counter(keys)] * 2
    for seed in (3, 4):
        got, states = run_passes(make, 2, random_stops(seed, 4, len(keys) * 2))
        assert _passes(got) == _passes(plain) and len(states) >= 3


def test_refusals(sets: tuple[list[str], list[str], list[str]]) -> None:
    a, b, _ = sets
    unseeded = wds.RandomMix([wds.WebDataset(a), wds.WebDataset(b)])
    with pytest.raises(ConfigError, match="seed="):
        wds.DataPipeline(unseeded).state_dict()
    buffered = wds.DataPipeline(_mix(a, b, True, resampled=True)).shuffle(3)
    with pytest.raises(ConfigError, match="resampled and a stage between"):
        buffered.state_dict()
    in_worker = wds.DataPipeline(_mix(a, b, True)).shuffle(3)
    loader = wds.WebLoader(in_worker, num_workers=2, batch_size=None)
    with pytest.raises(ConfigError, match="inside a DataLoader worker has stages after it"):
        loader.state_dict()
    windowed = wds.DataPipeline(_mix(a, b, True)).with_epoch(5)
    with pytest.raises(ConfigError, match="not a window"):
        windowed.state_dict()


@pytest.mark.slow
def test_other_worker_count_refused(sets: tuple[list[str], list[str], list[str]]) -> None:
    a, b, _ = sets

    def make(workers: int) -> Any:
        ds = wds.DataPipeline(_mix(a, b, True)).batched(3)
        return wds.WebLoader(ds, num_workers=workers, batch_size=None)

    loader = make(2)
    next(iter(loader))
    state = loader.state_dict()
    other = make(1)
    other.load_state_dict(state)
    with pytest.raises(ConfigError, match="same numbers"):
        next(iter(other))


@pytest.fixture(scope="module")
def joined(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, str], list[str]]:
    """Column sets ``img``/``txt``/``emb`` of 4 shards x 6 samples (``tests/core/joinsets``)."""
    from tests.core.joinsets import make_sets, shard_keys
    from tests.core.test_join import write_sets

    specs = write_sets(tmp_path_factory.mktemp("joined"), make_sets(4, 6))
    return specs, [k for i in range(4) for k in shard_keys(i, 6)]


def _join_mix(specs: dict[str, str], b: list[str]) -> Any:
    from tests.core.joinsets import aligned

    def key_if_aligned(sample: dict[str, Any]) -> tuple[bytes]:
        assert aligned(sample), sample["__key__"]
        return (sample["__key__"].encode(),)

    joined = wds.WebDataset(wds.join(specs, columns=["img", "txt"]), shardshuffle=True, seed=3)
    dsb = wds.WebDataset(b, shardshuffle=True, seed=2).to_tuple("txt")
    return wds.RandomMix([joined.map(key_if_aligned), dsb], [0.5, 0.5], longest=True, seed=5)


@pytest.mark.parametrize("buffer", [0, 5])
def test_mix_over_a_join(
    sets: tuple[list[str], list[str], list[str]],
    joined: tuple[dict[str, str], list[str]],
    buffer: int,
) -> None:
    """A join mixed with a plain dataset (``RandomMix``), stopped and resumed over 3 passes:
    every merged sample aligned; without a buffer the uninterrupted run, with one the same
    samples in each pass, each once."""
    _, b, _ = sets
    specs, join_keys = joined
    b_keys = sets[2][36:]  # after a's 4 x 9

    def make() -> Any:
        return wds.DataPipeline(_join_mix(specs, b)).shuffle(buffer)

    def keys(item: Any) -> list[str]:
        return [item[0].decode()]

    plain, _ = run_passes(make, 3, [], keys)
    assert _passes(plain) == [Counter(join_keys + b_keys)] * 3
    assert plain[0] != plain[1]  # the epochs advance
    total = sum(map(len, plain))
    for seed in (8, 9):
        stops = random_stops(seed, 6, total)
        got, states = run_passes(make, 3, stops, keys)
        assert len(states) == len(set(stops)) and all("mixers" in s for s in states)
        if buffer == 0:
            assert got == plain
        else:
            assert _passes(got) == _passes(plain)


def test_loader_over_a_join_mix(
    sets: tuple[list[str], list[str], list[str]], joined: tuple[dict[str, str], list[str]]
) -> None:
    """The same mix in 2 DataLoader workers (batched there, re-batched after a shuffle in the
    main process): every stop resumes each pass exactly once."""
    _, b, _ = sets
    specs, join_keys = joined
    b_keys = sets[2][36:]  # after a's 4 x 9

    def make() -> Any:
        ds = wds.DataPipeline(_join_mix(specs, b)).batched(3)
        loader = wds.WebLoader(ds, num_workers=2, batch_size=None)
        return loader.unbatched().shuffle(4).batched(4, collation_fn=list)

    plain, _ = run_passes(make, 2, [], _batch_keys)
    assert _passes(plain) == [Counter(join_keys + b_keys)] * 2
    total = sum(map(len, plain)) // 4
    stops = random_stops(11, 5, total)
    got, states = run_passes(make, 2, stops, _batch_keys)
    assert _passes(got) == _passes(plain)
    assert len(states) == len(set(stops))
