"""Elastic resume: a state saved by 2 ranks x 2 workers (a real gloo process group) resumed by
other world sizes and worker counts delivers the rest of the epoch exactly once, spread over the
new readers, then the next epochs as usual."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.resume.helpers import assert_exactly_once, write_shards
from wds_cloud.resume import merge_states

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = Path(__file__).with_name("elastic_rank.py")
SHARDS, PER_SHARD = 16, 20  # 320 samples: 160 per rank, 20 batches of 8
STOP = 8  # batches per rank before the checkpoint: 40 % of the epoch


def run_ranks(
    tmp: Path, name: str, world: int, workers: int, dist: bool, **cfg: Any
) -> list[dict[str, Any]]:
    """Run ``world`` ranks of ``elastic_rank.py`` at once; return their outputs by rank."""
    confs, outs = [], []
    for rank in range(world):
        out = tmp / f"{name}-{rank}.json"
        conf = tmp / f"{name}-{rank}.conf.json"
        conf.write_text(
            json.dumps(
                {
                    **cfg,
                    "rank": rank,
                    "world": world,
                    "workers": workers,
                    "out": str(out),
                    "init": f"file://{tmp / ('init-' + name)}" if dist else None,
                }
            )
        )
        confs.append(str(conf))
        outs.append(out)
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE")}
    env["PYTHONPATH"] = str(ROOT)
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), *confs],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stderr[-5000:]
    return [json.loads(out.read_text()) for out in outs]


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Shards, and what 2 ranks x 2 workers delivered before saving at 40 % of the epoch."""
    tmp = tmp_path_factory.mktemp("elastic")
    urls, keys = write_shards(tmp, SHARDS, PER_SHARD)
    ranks = run_ranks(tmp, "save", 2, 2, True, urls=urls, state=None, stop=STOP)
    return {"tmp": tmp, "urls": urls, "keys": keys, "ranks": ranks}


def test_every_rank_gets_the_same_global_state(saved: dict[str, Any]) -> None:
    states = [r["state"] for r in saved["ranks"]]
    assert states[0] == states[1]
    before = [k for r in saved["ranks"] for k, _ in r["before"]]
    assert len(before) == 2 * STOP * 8
    assert states[0]["delivered"] == len(before)  # both ranks' deliveries, not one rank's
    assert len({reader for r in saved["ranks"] for _, reader in r["before"]}) == 4


@pytest.mark.parametrize(("world", "workers"), [(1, 4), (3, 1), (4, 2)])
def test_resume_with_other_world_and_workers(
    saved: dict[str, Any], world: int, workers: int
) -> None:
    tmp, urls, keys = saved["tmp"], saved["urls"], saved["keys"]
    state = json.loads(json.dumps(saved["ranks"][0]["state"]))
    ranks = run_ranks(
        tmp, f"resume-{world}x{workers}", world, workers, True, urls=urls, state=state
    )
    before = [k for r in saved["ranks"] for k, _ in r["before"]]
    rest = [k for r in ranks for k, _ in r["rest"]]
    assert_exactly_once(before + rest, keys)
    # the rest of the epoch is spread over all new readers, within one shard of each other
    loads = Counter(reader for r in ranks for _, reader in r["rest"])
    assert set(loads) == {f"{r}/{w}" for r in range(world) for w in range(workers)}
    assert max(loads.values()) - min(loads.values()) <= PER_SHARD, loads
    # then the next epoch, whole, on the new readers
    assert_exactly_once([k for r in ranks for k, _ in r["next"]], keys)


def test_states_saved_per_rank_merged(saved: dict[str, Any]) -> None:
    """Without torch.distributed (RANK/WORLD_SIZE only) each rank saves its own state;
    ``merge_states`` makes the global one."""
    tmp, urls, keys = saved["tmp"], saved["urls"], saved["keys"]
    ranks = run_ranks(tmp, "env-save", 2, 2, False, urls=urls, state=None, stop=STOP)
    states = [r["state"] for r in ranks]
    assert states[0] != states[1]  # each rank's own deliveries
    merged = merge_states(states)
    assert merged["delivered"] == sum(s["delivered"] for s in states)
    resumed = run_ranks(tmp, "env-resume", 3, 1, False, urls=urls, state=merged, stop=None)
    before = [k for r in ranks for k, _ in r["before"]]
    assert_exactly_once(before + [k for r in resumed for k, _ in r["rest"]], keys)
    assert_exactly_once([k for r in resumed for k, _ in r["next"]], keys)


def test_resumed_run_saved_again_by_other_numbers(saved: dict[str, Any]) -> None:
    """2 x 2 saves, 3 x 1 resumes and saves again 3 batches later, 1 x 4 finishes."""
    tmp, urls, keys = saved["tmp"], saved["urls"], saved["keys"]
    state = saved["ranks"][0]["state"]
    middle = run_ranks(tmp, "chain-3x1", 3, 1, True, urls=urls, state=state, stop=3)
    assert all(r["state"] == middle[0]["state"] for r in middle)
    assert middle[0]["state"]["generation"] == 1
    last = run_ranks(tmp, "chain-1x4", 1, 4, True, urls=urls, state=middle[0]["state"], stop=None)
    delivered = [k for run in (saved["ranks"], middle) for r in run for k, _ in r["before"]]
    assert_exactly_once(delivered + [k for k, _ in last[0]["rest"]], keys)


def test_read_ahead_state_is_the_loaders_at_the_same_step(saved: dict[str, Any]) -> None:
    """``DevicePrefetcher``'s loop (``ReadAhead``) under a real gloo group, 2 ranks x 2 workers:
    the state it gives after ``STOP`` batches, one batch more already read, is the global state
    the plain loader gave at that step (the same on both ranks)."""
    ranks = run_ranks(
        saved["tmp"], "ahead", 2, 2, True, urls=saved["urls"], state=None, stop=STOP, ahead=True
    )
    assert ranks[0]["state"] == ranks[1]["state"] == saved["ranks"][0]["state"]
    assert [r["before"] for r in ranks] == [r["before"] for r in saved["ranks"]]


def test_read_ahead_with_uneven_ranks_does_not_meet_per_batch(saved: dict[str, Any]) -> None:
    """15 shards over 2 ranks: rank 0 reads more batches than rank 1. ``ReadAhead`` takes
    each rank's local state after every batch; were that a collective (``state_dict()`` under
    ``torch.distributed`` is), rank 0 would wait forever for rank 1. Both epochs end, every
    sample once per epoch."""
    urls = saved["urls"][:15]
    ranks = run_ranks(saved["tmp"], "uneven", 2, 2, True, urls=urls, state=None, ahead=True)
    keys = [k for k in saved["keys"] if int(k[1:4]) < 15]  # "s{shard:03d}/k{i:05d}"
    for field in ("rest", "next"):
        got = [k for r in ranks for k, _ in r[field]]
        assert sorted(got) == sorted(keys)
    assert len(ranks[0]["rest"]) > len(ranks[1]["rest"])
