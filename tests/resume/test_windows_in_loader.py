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
from tests.resume.helpers import keys_of_batch, random_stops, write_shards
from wds_cloud.errors import ConfigError

pytestmark = pytest.mark.slow

BATCH = 8


def _keys(batch: Any) -> list[str]:
    return [t[0].decode() for t in batch]


def run_windows(
    make: Callable[[], Any],
    windows: int,
    stops: list[int],
    checked: bool = True,
    keys_of: Callable[[Any], list[str]] = _keys,
) -> tuple[list[list[str]], list[list[int]], list[dict[str, Any]]]:
    """The keys of ``windows`` consecutive ``iter()`` calls (one list per window) and their
    batch sizes; after the ``n``-th batch for ``n`` in ``stops`` the state goes through JSON
    into a fresh ``make()`` that continues the window (``checked``: the state's ``window``
    is the count of samples delivered in this window)."""
    stops = sorted(set(stops))
    keys: list[list[str]] = [[] for _ in range(windows)]
    sizes: list[list[int]] = [[] for _ in range(windows)]
    states: list[dict[str, Any]] = []
    obj, n, w = make(), 0, 0
    while w < windows:
        for batch in obj:
            got = keys_of(batch)
            keys[w].extend(got)
            sizes[w].append(len(got))
            n += 1
            if stops and n == stops[0]:
                stops.pop(0)
                state = json.loads(json.dumps(obj.state_dict()))
                assert not checked or state.get("finished") or state["window"] == len(keys[w])
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
    stops = random_stops(1, 5, 2 * len(plain_sizes[0]))
    got, sizes, states = run_windows(make, 2, stops)
    assert len(states) == len(set(stops))
    assert sizes == plain_sizes
    for window in got + plain:
        assert Counter(window) == Counter({k: 2 for k in keys})


@pytest.mark.parametrize(("seed", "part"), [(3, 1.5), (4, 0.5)])
def test_epoch_size_inside_passes(
    shards: tuple[list[str], list[str]], seed: int, part: float
) -> None:
    """Windows of a pass and a half, and of part of a pass: each window holds ``epoch_size``
    samples in the same batch sizes, its first pass whole and no sample of a pass twice."""
    urls, keys = shards
    epoch_size = int(len(keys) * part) + 3
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


# -- with_epoch on the dataset inside a WebLoader: a window per worker -------------------------


def _worker_windows(
    urls: list[str],
    n: int,
    *,
    resampled: bool = False,
    buffer: int = 5,
    main: bool = False,
    workers: int = 2,
    persistent: bool = False,
) -> Callable[[], Any]:
    """``WebLoader(WebDataset(...).shuffle(buffer).to_tuple(...).batched(4).with_epoch(n))``:
    each of the 2 workers yields ``n`` batches of 4 per ``iter()`` (``main``: unbatched, shuffled
    and batched by 8 again in the main process)."""

    def make() -> Any:
        ds = wds.WebDataset(urls, resampled=resampled, shardshuffle=not resampled, seed=5)
        ds = ds.shuffle(buffer).to_tuple("txt", "cls").batched(4)
        loader = wds.WebLoader(
            ds.with_epoch(n), num_workers=workers, batch_size=None, persistent_workers=persistent
        )
        if main:
            return loader.unbatched().shuffle(6).batched(BATCH, collation_fn=list)
        return loader

    return make


@pytest.mark.parametrize("seed", [1, 2])
def test_worker_windows_of_whole_passes(shards: tuple[list[str], list[str]], seed: int) -> None:
    """Each worker's window is two whole passes over its shards (3 shards of 10: 8 batches a
    pass): every sample twice per ``iter()``, in the same batch sizes, however interrupted."""
    urls, keys = shards
    make = _worker_windows(urls, 16)
    plain, plain_sizes, _ = run_windows(make, 2, [], checked=False, keys_of=keys_of_batch)
    got, sizes, states = run_windows(
        make, 2, random_stops(seed, 4, 64), checked=False, keys_of=keys_of_batch
    )
    assert len(plain_sizes[0]) == 32
    for window, size, plain_size in zip(got + plain, sizes, plain_sizes, strict=False):
        assert Counter(window) == Counter({k: 2 for k in keys})
        assert Counter(size) == Counter(plain_size)
    live = [s for s in states if not s.get("finished")]
    assert live and all(set(s["windows"]) <= {"0.0", "0.1"} for s in live)
    assert all(len(json.dumps(s)) < 4000 for s in states)


@pytest.mark.parametrize("seed", [3, 4])
def test_worker_windows_cut_inside_a_pass(shards: tuple[list[str], list[str]], seed: int) -> None:
    """A window of two passes and 3 batches: the same number of samples per ``iter()`` as the
    uninterrupted run, both whole passes delivered once and the third at most once."""
    urls, keys = shards
    make = _worker_windows(urls, 19)
    plain, plain_sizes, _ = run_windows(make, 2, [], checked=False, keys_of=keys_of_batch)
    got, sizes, _ = run_windows(
        make, 2, random_stops(seed, 4, 76), checked=False, keys_of=keys_of_batch
    )
    for size, plain_size in zip(sizes, plain_sizes, strict=True):
        assert sum(size) == sum(plain_size)
    for window in got + plain:
        counts = Counter(window)
        assert set(counts) == set(keys) and set(counts.values()) <= {2, 3}


def test_worker_windows_resampled(shards: tuple[list[str], list[str]]) -> None:
    """resampled=True: each worker goes on with its own draws. Without sample buffers a window
    holds the uninterrupted run's samples (the round robin over the workers restarts at worker
    0, so the order can differ); with buffers, all but those buffered at the window's cut."""
    urls, _ = shards
    for buffer, bound in ((0, 0), (5, 2 * 5 + 2 * 2 * 4)):
        make = _worker_windows(urls, 15, resampled=True, buffer=buffer)
        plain, _, _ = run_windows(make, 2, [], checked=False, keys_of=keys_of_batch)
        for seed in (5,):
            got, _, states = run_windows(
                make, 2, random_stops(seed, 4, 60), checked=False, keys_of=keys_of_batch
            )
            for mine, theirs in zip(got, plain, strict=True):
                assert len(mine) == len(theirs) == 120
                assert sum((Counter(mine) - Counter(theirs)).values()) <= bound
            assert all(
                "draws" in p
                for s in states
                for w in s.get("windows", {}).values()
                for p in w["passes"]
            )


def test_worker_windows_under_main_process_buffers(shards: tuple[list[str], list[str]]) -> None:
    """Worker batches unbatched, shuffled and batched again in the main process: a batch
    partly delivered counts as one of the worker's window and its other rows are read again
    (into new batches), so no sample of a pass is delivered twice and the first pass of every
    window is whole; the window can hold fewer samples than the uninterrupted one."""
    urls, keys = shards
    make = _worker_windows(urls, 19, main=True)
    plain, _, _ = run_windows(make, 2, [], checked=False)
    total = len(plain[0])
    for seed in (7,):
        got, _, _ = run_windows(make, 2, random_stops(seed, 4, 2 * total // BATCH), checked=False)
        for window in got:
            counts = Counter(window)
            assert set(counts) == set(keys) and max(counts.values()) <= 3
            assert total - 2 * (6 + 2 * 2 * 4) <= len(window) <= total


def test_worker_windows_refusals(shards: tuple[list[str], list[str]]) -> None:
    urls, _ = shards
    ds = wds.WebDataset(urls, seed=1).to_tuple("txt").with_epoch(3)
    twice = wds.WebLoader(ds, num_workers=1, batch_size=None).with_epoch(5)
    with pytest.raises(ConfigError, match="with_epoch"):
        twice.state_dict()


@pytest.mark.parametrize("resampled", [False, True])
def test_worker_windows_other_worker_counts(
    shards: tuple[list[str], list[str]], resampled: bool
) -> None:
    """A state of 2 workers' windows loaded by 3, 1 or no workers: the new workers take over
    the old windows (old reader ``j`` to new slot ``j % slots``), reading them as the old
    workers would have; without sample buffers the windows hold the uninterrupted samples."""
    urls, _ = shards

    def make(workers: int) -> Any:
        return _worker_windows(urls, 19, resampled=resampled, buffer=0, workers=workers)()

    plain = [k for batch in make(2) for k in keys_of_batch(batch)]
    for stop, workers in ((3, 3), (17, 1), (30, 0)):
        two = make(2)
        before: list[str] = []
        for step, batch in enumerate(two, 1):
            before.extend(keys_of_batch(batch))
            if step == stop:
                break
        state = json.loads(json.dumps(two.state_dict()))
        assert state["readers"] == [1, 2] and not state.get("finished")
        other = make(workers)
        other.load_state_dict(state)
        rest = [k for batch in other for k in keys_of_batch(batch)]
        assert Counter(before + rest) == Counter(plain)
        assert len([k for batch in other for k in keys_of_batch(batch)]) == 19 * 4 * max(1, workers)


# -- persistent workers: each worker's windows go on from where its previous one ended ----------


@pytest.mark.parametrize(
    ("workers", "persistent", "resampled"),
    [(0, False, False), (2, True, False), (2, True, True)],
    ids=["0", "2p", "2p-resampled"],
)
def test_worker_windows_persistent(
    shards: tuple[list[str], list[str]], workers: int, persistent: bool, resampled: bool
) -> None:
    """Windows of a pass and a bit under persistent workers: each worker's copy of the
    dataset advances its epoch pass by pass, so consecutive windows read different passes;
    interrupted anywhere (inside a window, at its last batch, in the next one) the resumed
    windows are the uninterrupted ones: without sample buffers the same samples (the same
    sequence with one reader), every pass of a window at most once and the first one whole."""
    urls, keys = shards
    n = 10 if workers else 19  # a worker's pass: 3 shards of 10 = 8 batches of 4 (or 15)
    make = _worker_windows(
        urls, n, resampled=resampled, buffer=0, workers=workers, persistent=persistent
    )
    plain, plain_sizes, _ = run_windows(make, 3, [], checked=False, keys_of=keys_of_batch)
    if not resampled:
        assert plain[0] != plain[1] or not persistent  # the windows read other passes
    per = sum(plain_sizes[0]) // 4
    for seed in (11, 12):
        stops = random_stops(seed, 5, 3 * per)
        got, _, states = run_windows(make, 3, stops, checked=False, keys_of=keys_of_batch)
        for mine, theirs in zip(got, plain, strict=True):
            assert Counter(mine) == Counter(theirs)
        if workers == 0:
            assert got == plain
        else:
            live = [s for s in states if not s.get("finished")]
            assert all(s.get("persistent") for s in live)
    # a state taken at each window's last batch (finished), then inside the next
    ends = [sum(len(w) for w in plain[: i + 1]) // 4 for i in range(2)]
    stops = [ends[0], ends[0] + 1, ends[0] + 5, ends[1] - 1, ends[1]]
    got, _, states = run_windows(make, 3, stops, checked=False, keys_of=keys_of_batch)
    assert [Counter(w) for w in got] == [Counter(w) for w in plain]
    assert any(s.get("finished") for s in states)
    if workers == 0:
        assert got == plain
    if not resampled:  # a pass and a bit: the first pass whole, no sample three times
        assert all(max(Counter(w).values()) <= 2 for w in got) and set(got[0]) == set(keys)
