"""``make_loader(order="global")`` killed with SIGKILL mid-epoch, in real processes: ranks of a
gloo process group (``global_rank.py``) with DataLoader workers, resumed from the last
checkpoint by the same or by other numbers of ranks x workers. Every sample of the epoch is
delivered exactly once along the chain of checkpoints, and every rank saved the same state."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import wds_cloud as wds
from tests.resume.helpers import assert_exactly_once, run_killed, write_shards

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = Path(__file__).with_name("global_rank.py")
SHARDS, PER_SHARD = 16, 30  # 480 samples: batches of 12 split evenly over 1, 2, 3 or 4 ranks
EVERY = 2  # steps between checkpoints

#: (world, workers, the step of rank 0 at which the run is killed; None: it finishes)
RUNS = {
    "same": [(2, 2, 5), (2, 2, 7), (2, 2, None)],
    "elastic": [(2, 2, 5), (3, 1, 3), (1, 3, 9), (4, 2, None)],
}


def run(tmp: Path, urls: list[str], gen: int, world: int, workers: int, kill: int | None) -> None:
    """One run of ``world`` ranks; rank 0 SIGKILLs the group (ranks and workers) at ``kill``."""
    conf = tmp / f"conf-{gen}.json"
    conf.write_text(
        json.dumps(
            {
                "urls": urls,
                "gen": gen,
                "world": world,
                "workers": workers,
                "every": EVERY,
                "kill": kill,
                "ckpt": str(tmp / "ckpt.json"),
                "dir": str(tmp),
                "init": f"file://{tmp / f'init-{gen}'}",
            }
        )
    )
    run_killed(SCRIPT, conf, kill, ROOT)


def logged(tmp: Path, gen: int, upto: int | None = None) -> list[tuple[str, str]]:
    """``(key, reader)`` of what run ``gen``'s ranks logged, up to step ``upto``."""
    out = []
    for path in sorted(tmp.glob(f"log-{gen}-*.txt")):
        for line in path.read_text().splitlines():
            step, key, reader = line.split()
            if upto is None or int(step) <= upto:
                out.append((key, reader))
    return out


@pytest.mark.parametrize("name", list(RUNS))
def test_sigkill_and_resume(tmp_path: Path, name: str) -> None:
    urls, keys = write_shards(tmp_path, SHARDS, PER_SHARD)
    wds.build_index(urls, json=None)
    resumed_from: list[tuple[int, int] | None] = []
    for gen, (world, workers, kill) in enumerate(RUNS[name]):
        ckpt = tmp_path / "ckpt.json"
        saved = json.loads(ckpt.read_text()) if ckpt.exists() else None
        resumed_from.append((saved["gen"], saved["step"]) if saved else None)
        run(tmp_path, urls, gen, world, workers, kill)
    last = len(RUNS[name]) - 1
    final = logged(tmp_path, last)
    delivered = [key for key, _ in final]
    link = resumed_from[last]
    chain = []
    while link is not None:  # the checkpoints the final run descends from
        gen, step = link
        chain.append(gen)
        delivered += [key for key, _ in logged(tmp_path, gen, step)]
        link = resumed_from[gen]
    # each killed run saved at step kill - 1 (every 2 steps, kills at odd steps) and the next
    # one resumed from there: no run is skipped
    assert len(chain) == last
    assert resumed_from[1:] == [
        (gen, kill - 1) for gen, (_, _, kill) in enumerate(RUNS[name][:-1]) if kill
    ]
    assert_exactly_once(delivered, keys)
    world, workers, _ = RUNS[name][last]
    assert {reader for _, reader in final} == {
        f"{r}/{w}" for r in range(world) for w in range(workers)
    }
    state = json.loads((tmp_path / "ckpt.json").read_text())["loader"]
    assert len(json.dumps(state)) < 120
