"""Resume of ``with_epoch`` windows set inside the object iterated: ``make_loader(epoch_size=)``.

Each test compares runs interrupted at random points (the state through JSON, a fresh loader
loading it, 2 DataLoader workers) with one uninterrupted run of the same seed."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

import wds_cloud as wds
from tests.resume.helpers import random_stops, write_shards
from wds_cloud.errors import ConfigError

pytestmark = pytest.mark.slow

BATCH = 8


def _keys(batch: Any) -> list[str]:
    return [t[0].decode() for t in batch]


def run_windows(
    make: Callable[[], Any], windows: int, stops: list[int]
) -> tuple[list[list[str]], list[list[int]], list[dict[str, Any]]]:
    """The keys of ``windows`` consecutive ``iter()`` calls (one list per window) and their
    batch sizes; after the ``n``-th batch for ``n`` in ``stops`` the state goes through JSON
    into a fresh ``make()`` that continues the window."""
    stops = sorted(set(stops))
    keys: list[list[str]] = [[] for _ in range(windows)]
    sizes: list[list[int]] = [[] for _ in range(windows)]
    states: list[dict[str, Any]] = []
    obj, n, w = make(), 0, 0
    while w < windows:
        for batch in obj:
            keys[w].extend(_keys(batch))
            sizes[w].append(len(batch))
            n += 1
            if stops and n == stops[0]:
                stops.pop(0)
                state = json.loads(json.dumps(obj.state_dict()))
                assert state.get("finished") or state["window"] == len(keys[w])
                states.append(state)
                obj = make()
                obj.load_state_dict(state)
                w += bool(state.get("finished"))
                break
        else:
            w += 1
    return keys, sizes, states


def _make(urls: list[str], epoch_size: int, **kw: Any) -> Callable[[], Any]:
    def make() -> Any:
        options: dict[str, Any] = {"shuffle_buffer": 6, "seed": 11, **kw}
        return wds.make_loader(
            urls,
            batch_size=BATCH,
            num_workers=2,
            to_tuple=("txt", "cls"),
            collate=list,
            epoch_size=epoch_size,
            **options,
        )

    return make


@pytest.fixture(scope="module")
def shards(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[str], list[str]]:
    return write_shards(tmp_path_factory.mktemp("shards"), 6, 10)


def test_epoch_size_of_whole_passes(shards: tuple[list[str], list[str]]) -> None:
    """Each window is two whole passes: every sample twice, whatever the interruptions."""
    urls, keys = shards
    make = _make(urls, 2 * len(keys))
    plain, plain_sizes, _ = run_windows(make, 2, [])
    for seed in (1, 2):
        stops = random_stops(seed, 4, 2 * len(plain_sizes[0]))
        got, sizes, states = run_windows(make, 2, stops)
        assert len(states) == len(set(stops))
        assert sizes == plain_sizes
        for window in got + plain:
            assert Counter(window) == Counter({k: 2 for k in keys})


@pytest.mark.parametrize("seed", [3, 4])
def test_epoch_size_inside_passes(shards: tuple[list[str], list[str]], seed: int) -> None:
    """Windows of a pass and a half, and of part of a pass: each window holds ``epoch_size``
    samples in the same batch sizes, its first pass whole and no sample of a pass twice."""
    urls, keys = shards
    for epoch_size in (len(keys) * 3 // 2 + 3, len(keys) // 2 + 5):
        make = _make(urls, epoch_size)
        plain, plain_sizes, _ = run_windows(make, 2, [])
        got, sizes, states = run_windows(make, 2, random_stops(seed, 3, 2 * len(plain_sizes[0])))
        assert sizes == plain_sizes
        assert [len(w) for w in got + plain] == [epoch_size] * 4
        for window in got + plain:
            counts = Counter(window)
            assert set(counts) <= set(keys) and max(counts.values()) <= 2
            if epoch_size > len(keys):
                assert set(counts) == set(keys)
            else:
                assert max(counts.values()) == 1
        assert {s.get("pass") for s in states if not s.get("finished")} <= {0, 1}


def test_resampled_same_sequence_without_buffers(shards: tuple[list[str], list[str]]) -> None:
    """resampled=True: every worker goes on with its own draws, so without sample buffers (and
    an outer batch of one inner batch per worker) the sequence is the uninterrupted one."""
    urls, _ = shards
    make = _make(urls, 100, resampled=True, shuffle_buffer=0, inner_batch=BATCH // 2)
    plain, _, _ = run_windows(make, 3, [])
    assert plain[0] == plain[1]  # non-persistent workers draw the same shards each window
    for seed in (5, 6):
        got, _, states = run_windows(make, 3, random_stops(seed, 4, 39))
        assert got == plain
        live = [s for s in states if not s.get("finished")]
        assert live and all(set(s["draws"]) <= {"0.0", "0.1"} for s in live)


def test_resampled_with_buffers(shards: tuple[list[str], list[str]]) -> None:
    """With shuffle buffers the resumed windows hold the same draws: they differ from the
    uninterrupted ones only by the samples that were in buffers at the window's cut."""
    urls, _ = shards
    make = _make(urls, 120, resampled=True, shuffle_buffer=4, inner_batch=4)
    plain, plain_sizes, _ = run_windows(make, 2, [])
    # buffered when the window is cut: worker shuffles, inner batches, prefetched batches
    # (2 per worker), the main shuffle and the unbatched rest
    bound = 2 * 4 + 2 * 4 + 2 * 2 * 4 + 4 + 4
    for seed in (7, 8):
        got, sizes, _ = run_windows(make, 2, random_stops(seed, 4, 2 * len(plain_sizes[0])))
        assert sizes == plain_sizes
        for mine, theirs in zip(got, plain, strict=True):
            assert len(mine) == 120
            diff = Counter(mine) - Counter(theirs)
            assert sum(diff.values()) <= bound, diff


def test_window_under_holding_stages_is_refused(shards: tuple[list[str], list[str]]) -> None:
    """A window with a stage above it that holds items (a shuffle) cannot be resumed; lazy
    stages above it can."""
    urls, _ = shards
    inner = wds.WebDataset(urls, seed=1).to_tuple("txt").with_epoch(7)
    with pytest.raises(ConfigError, match="with_epoch"):
        wds.DataPipeline(inner).shuffle(3).state_dict()
    ok = wds.DataPipeline(inner).batched(2)
    got = [k for batch in ok for k in batch[0]]
    assert len(got) == 7 and ok.state_dict()["finished"]
