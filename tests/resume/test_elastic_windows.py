"""``with_epoch`` windows on a WebLoader's dataset (a window per DataLoader worker) under a real
gloo process group: 2 ranks x 2 workers save (the ranks' states gathered and merged with
``merge_windows``), resumed by 1 rank x 2 workers and 3 ranks x 1 worker; the workers take over
the old readers' windows, and every window is delivered as the uninterrupted run's. Also a
RandomMix read by the workers of 2 ranks: its gathered state (``merge_mixes``)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.resume.helpers import assert_exactly_once, write_shards
from tests.resume.test_elastic import run_ranks
from wds_cloud.resume.merge import merge_windows
from wds_cloud.resume.worker_windows import adopted

pytestmark = pytest.mark.slow

SHARDS, PER_SHARD = 16, 20  # per worker of 2 x 2: 4 shards, 80 samples, 20 batches of 4 a pass
STOP = 30  # batches per rank before the checkpoint
CASES = {"cut": (50, 0), "whole": (40, 10)}  # window (batches), worker shuffle buffer


def _keys(run: list[dict[str, Any]], part: str) -> list[str]:
    return [k for r in run for k, _ in r[part]]


@pytest.fixture(scope="module", params=sorted(CASES))
def saved(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """Shards; the uninterrupted 2 x 2 run; what 2 x 2 delivered before saving and the state."""
    window, buffer = CASES[request.param]
    tmp = tmp_path_factory.mktemp(f"windows-{request.param}")
    urls, keys = write_shards(tmp, SHARDS, PER_SHARD)
    cfg = {"urls": urls, "window": window, "buffer": buffer}
    plain = run_ranks(tmp, "plain", 2, 2, True, **cfg, state=None, stop=None)
    ranks = run_ranks(tmp, "save", 2, 2, True, **cfg, state=None, stop=STOP)
    return {
        "tmp": tmp,
        "cfg": cfg,
        "keys": keys,
        "plain": plain,
        "ranks": ranks,
        "case": request.param,
    }


def test_gathered_state_holds_every_reader(saved: dict[str, Any]) -> None:
    states = [r["state"] for r in saved["ranks"]]
    assert states[0] == states[1]
    assert sorted(states[0]["windows"]) == ["0.0", "0.1", "1.0", "1.1"]
    assert states[0]["readers"] == [2, 2]
    assert sum(w["window"] for w in states[0]["windows"].values()) == 2 * STOP
    assert merge_windows(states) == states[0]


@pytest.mark.parametrize(("world", "workers"), [(1, 2), (3, 1)])
def test_resume_with_other_ranks(saved: dict[str, Any], world: int, workers: int) -> None:
    tmp, cfg, keys = saved["tmp"], saved["cfg"], saved["keys"]
    state = json.loads(json.dumps(saved["ranks"][0]["state"]))
    name = f"resume-{saved['case']}-{world}x{workers}"
    ranks = run_ranks(tmp, name, world, workers, True, **cfg, state=state)
    got = _keys(saved["ranks"], "before") + _keys(ranks, "rest")
    plain = _keys(saved["plain"], "rest")
    if saved["case"] == "cut":  # no buffers: every window holds the uninterrupted run's samples
        assert Counter(got) == Counter(plain)
    else:  # two whole passes per window: every sample twice, whatever the buffers
        assert Counter(got) == Counter(plain) == Counter({k: 2 for k in keys})
    # every new reader took over its old windows; then fresh windows of the new readers
    readers = {reader for r in ranks for _, reader in r["rest"]}
    assert readers == {f"{r}/{w}" for r in range(world) for w in range(workers)}
    nxt = _keys(ranks, "next")
    assert len(nxt) == world * workers * cfg["window"] * 4


def test_resumed_run_saved_again_by_other_numbers(saved: dict[str, Any]) -> None:
    """2 x 2 saves, 3 x 1 resumes and saves again 10 batches later (each old window's entry
    taken from the rank that took it over), 1 x 2 finishes: exactly the uninterrupted run."""
    tmp, cfg = saved["tmp"], saved["cfg"]
    state = saved["ranks"][0]["state"]
    name = f"chain-{saved['case']}"
    middle = run_ranks(tmp, f"{name}-3x1", 3, 1, True, **cfg, state=state, stop=10)
    assert all(r["state"] == middle[0]["state"] for r in middle)
    assert middle[0]["state"]["readers"] == [2, 2] and middle[0]["state"]["generation"] == 1
    last = run_ranks(tmp, f"{name}-1x2", 1, 2, True, **cfg, state=middle[0]["state"], stop=None)
    got = _keys(saved["ranks"], "before") + _keys(middle, "before") + _keys(last, "rest")
    assert Counter(got) == Counter(_keys(saved["plain"], "rest"))


def test_adopted() -> None:
    """Old reader ``j`` goes to new slot ``j % slots``."""
    assert [adopted([2, 2], [0, 3, 0, 1]), adopted([2, 2], [2, 3, 0, 1])] == [
        [[0, 2, 0, 2], [1, 2, 1, 2]],
        [[1, 2, 0, 2]],
    ]
    assert adopted([2, 2], [0, 1, 1, 2]) == [[0, 2, 1, 2], [1, 2, 1, 2]]
    assert adopted([1, 2], [0, 1, 2, 3]) == []


def test_random_mix_in_workers_under_gloo(tmp_path: Path) -> None:
    """A RandomMix in the DataLoader workers of 2 ranks (2 workers each), buffers in the main
    process: the ranks' states are gathered and merged (``merge_mixes``), every rank gets the
    same one, and resuming it on 2 x 2 delivers the rest of the pass exactly once."""
    urls, keys = write_shards(tmp_path, SHARDS, PER_SHARD)
    saved = run_ranks(tmp_path, "mix-save", 2, 2, True, urls=urls, mix=True, state=None, stop=6)
    states = [r["state"] for r in saved]
    assert states[0] == states[1]
    assert sorted(states[0]["mixers"]) == ["0.0", "0.1", "1.0", "1.1"]
    state = json.loads(json.dumps(states[0]))
    rest = run_ranks(tmp_path, "mix-resume", 2, 2, True, urls=urls, mix=True, state=state)
    assert_exactly_once(_keys(saved, "before") + _keys(rest, "rest"), keys)
    assert_exactly_once(_keys(rest, "next"), keys)
