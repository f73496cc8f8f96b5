"""``make_loader(order="global", batches_in_flight=k)``: each worker reads ``k`` batches at once
(for backends whose every batch request pays a fixed wait, AIStore's GetBatch), the batches
still reach the loop one by one in the global order, and the state stays exact."""

from __future__ import annotations

import threading
from itertools import islice
from pathlib import Path
from typing import Any

import pytest

import wds_cloud as wds
from tests.index.test_global_loader import indexed, keys_of, make  # noqa: F401 - fixture
from tests.resume.helpers import assert_exactly_once, run_interrupted, write_shards
from tests.support.http_server import HttpFileServer
from wds_cloud.errors import ConfigError
from wds_cloud.openers.http.opener import HttpOpener
from wds_cloud.openers.registry import OpenerRegistry


@pytest.mark.parametrize(("workers", "k"), [(0, 3), (2, 3), (2, 4), (1, 13)])
def test_same_batches_as_one_at_a_time(
    indexed: tuple[str, list[str]],  # noqa: F811 - the fixture
    workers: int,
    k: int,
) -> None:
    """The same batches, in the same order (13 batches of 8 in the epoch: groups of 3 and 4
    leave a shorter last group; 13 is one group)."""
    json_url, keys = indexed
    want = [keys_of(b) for b in make(json_url)]
    loader = make(json_url, workers, batches_in_flight=k)
    assert len(loader) == len(want) == 13
    got = [keys_of(b) for b in loader]
    assert got == want
    assert_exactly_once([k for b in got for k in b], keys)


def test_resume_counts_batches_not_groups(
    indexed: tuple[str, list[str]],  # noqa: F811 - the fixture
) -> None:
    """A state taken after the loop's n-th batch has cursor n * BATCH, whatever the group a
    worker read it in, and resuming (with another k, or none) goes on after it."""
    json_url, keys = indexed
    whole = [k for b in make(json_url) for k in keys_of(b)]
    ks = iter([3, 1, 4, 2])
    delivered, states = run_interrupted(
        lambda: make(json_url, 2, batches_in_flight=next(ks)), [4, 5, 2], keys_of
    )
    assert delivered == whole
    assert_exactly_once(delivered, keys)
    assert [s["cursor"] for s in states] == [32, 72, 88]


def test_a_loop_left_early_goes_on_at_the_next_iter(
    indexed: tuple[str, list[str]],  # noqa: F811 - the fixture
) -> None:
    """Persistent workers reading groups of 3 ahead; the loop leaves in the middle of a group,
    then at a group's end, and the next ``iter()`` goes on after the last batch handed out."""
    json_url = indexed[0]
    whole = [keys_of(b) for b in make(json_url)]
    loader = make(json_url, 2, persistent_workers=True, batches_in_flight=3)
    got = [keys_of(b) for b in islice(loader, 2)]
    got += [keys_of(b) for b in islice(loader, 4)]
    got += [keys_of(b) for b in loader]
    assert got == whole


@pytest.mark.parametrize("k", [0, -1])
def test_bad_values_are_refused(
    indexed: tuple[str, list[str]],  # noqa: F811 - the fixture
    k: int,
) -> None:
    with pytest.raises(ConfigError, match=f"batches_in_flight must be >= 1, got {k}"):
        make(indexed[0], 1, batches_in_flight=k)


class _Gate:
    """``before_response`` of the server: every GET of a shard waits until ``k`` of them are
    being answered at once (a barrier); ``peak`` is the most at once, ``broken`` how many
    waited in vain (fewer than ``k`` ever came together)."""

    def __init__(self, k: int) -> None:
        self.barrier = threading.Barrier(k, timeout=10)
        self.lock = threading.Lock()
        self.active = self.peak = self.broken = self.shard_gets = 0

    def __call__(self, number: int, path: str) -> None:
        if not path.endswith(".tar"):
            return
        with self.lock:
            self.active += 1
            self.shard_gets += 1
            self.peak = max(self.peak, self.active)
        try:
            self.barrier.wait()
        except threading.BrokenBarrierError:
            with self.lock:
                self.broken += 1
            self.barrier.reset()
        finally:
            with self.lock:
                self.active -= 1


@pytest.mark.parametrize("k", [1, 3])
def test_k_batches_in_flight_at_a_counting_server(tmp_path: Path, k: int) -> None:
    """One worker, batches of one sample (one ranged GET each): the server sees exactly ``k``
    shard GETs at once, every time (12 batches = 4 groups of 3)."""
    urls, keys = write_shards(tmp_path, 2, 6)
    wds.build_index(urls, json=False)
    registry = OpenerRegistry()
    registry.register("http", HttpOpener(backoff=0.01), override=True)
    gate = _Gate(k)
    with HttpFileServer(tmp_path) as server:
        server.before_response = gate
        sources = [server.url(Path(u).name) for u in urls]
        loader = wds.make_loader(
            sources,
            order="global",
            batch_size=1,
            num_workers=1,
            batches_in_flight=k,
            registry=registry,
            collate=list,
        )
        got = [s["__key__"] for b in loader for s in b]
    assert_exactly_once(got, keys)
    assert gate.shard_gets == len(keys)
    assert (gate.peak, gate.broken) == (k, 0)


@pytest.mark.parametrize("option", [{"batches_in_flight": 2}, {"uneven": "pad"}])
def test_global_only_options_are_refused_when_streaming(option: dict[str, Any]) -> None:
    with pytest.raises(ConfigError, match="apply to order='global' only"):
        wds.make_loader(["x.tar"], batch_size=2, **option)
