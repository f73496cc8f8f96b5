"""A data plan killed with SIGKILL at random steps across 3 epochs while the world size goes
2 -> 3 -> 4 (gloo ranks, 2 DataLoader workers each; ``mixplan_rank.py``): along the chain of
checkpoints every sample id is delivered as many times as in an uninterrupted run, per source
and per epoch; every stratified batch holds 0.5 / 0.3 / 0.2 of 64 to one sample; every epoch
gives each source its exact count."""

from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import wds_cloud as wds
from tests.resume.helpers import run_killed
from tests.resume.mixplan_rank import BATCH, make_plan, write_sources

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = Path(__file__).with_name("mixplan_rank.py")
EPOCHS, PER_EPOCH = 3, 12  # batches of 64 an epoch (768 samples)
EVERY = 2  # steps between checkpoints
WORLDS = (2, 3, 4)
QUOTAS = {"a": 384, "b": 230, "c": 154}
WEIGHTS = {"a": 0.5, "b": 0.3, "c": 0.2}


def epoch_steps(world: int, epoch: int, batch: int, target: int) -> range:
    """The global steps (counted from 1 at ``(epoch, batch)``) of epoch ``target`` with
    ``world`` ranks (an epoch's last step may not reach every rank)."""
    per = -(-PER_EPOCH // world)
    rest = -(-(PER_EPOCH - batch) // world)  # what is left of ``epoch``
    if target == epoch:
        return range(1, rest + 1)
    first = rest + (target - epoch - 1) * per
    return range(first + 1, first + per + 1)


def run(tmp: Path, cfg: dict[str, Any], gen: int, world: int, kill: int | None) -> None:
    conf = tmp / f"conf-{gen}.json"
    conf.write_text(
        json.dumps(
            {
                **cfg,
                "gen": gen,
                "world": world,
                "workers": 2,
                "every": EVERY,
                "epochs": EPOCHS,
                "kill": kill,
                "ckpt": str(tmp / "ckpt.json"),
                "dir": str(tmp),
                "init": f"file://{tmp / f'init-{gen}'}",
            }
        )
    )
    run_killed(SCRIPT, conf, kill, ROOT)


def logged(tmp: Path, gen: int, upto: int | None = None) -> list[list[str]]:
    """``[epoch, step, rank, id, reader]`` of what run ``gen``'s ranks logged, to ``upto``."""
    out = []
    for path in sorted(tmp.glob(f"log-{gen}-*.txt")):
        for line in path.read_text().splitlines():
            row = line.split()
            if upto is None or int(row[1]) <= upto:
                out.append(row)
    return out


def reference(sources: dict[str, list[str]]) -> Counter[tuple[int, str]]:
    """``(epoch, id)`` counts of an uninterrupted run: one process, no workers, 3 epochs."""
    loader = wds.make_loader(
        make_plan(sources),
        batch_size=BATCH,
        num_workers=0,
        to_tuple=("txt", "__source__"),
        map=lambda s: f"{s[1]}:{s[0].decode()}",
        collate=list,
    )
    out: Counter[tuple[int, str]] = Counter()
    for epoch in range(EPOCHS):
        out.update((epoch, sid) for batch in loader for sid in batch)
    return out


@pytest.mark.parametrize("seed", [7, 11])
def test_sigkill_across_epochs_while_the_world_grows(tmp_path: Path, seed: int) -> None:
    sources = write_sources(tmp_path)
    rng = random.Random(seed)
    runs: list[tuple[int, int | None]] = []
    resumed_from: list[tuple[int, int] | None] = []
    position = (0, 0)  # (epoch, batch) of the latest checkpoint
    for gen, world in enumerate([*WORLDS, WORLDS[-1]]):
        ckpt = tmp_path / "ckpt.json"
        saved = json.loads(ckpt.read_text()) if ckpt.exists() else None
        resumed_from.append((saved["gen"], saved["step"]) if saved else None)
        if saved:
            position = (saved["loader"]["epoch"], saved["loader"]["batch"])
        # run g (of the killed ones) dies at a random odd step of epoch g (EVERY - 1 steps after
        # a checkpoint, which it resumes from), so the kills fall in all 3 epochs
        kill = None
        if gen < len(WORLDS):
            steps = epoch_steps(world, *position, target=gen)
            kill = rng.choice([k for k in steps if k % 2 and k >= 3])
        runs.append((world, kill))
        run(tmp_path, {"sources": sources}, gen, world, kill)
        if kill is not None:
            state = json.loads(ckpt.read_text())
            assert (state["gen"], state["step"]) == (gen, kill - 1)
            assert len(json.dumps(state["loader"])) < 300
    killed_in = {
        int(row[0])
        for gen, (_, kill) in enumerate(runs)
        for row in logged(tmp_path, gen)
        if kill is not None and int(row[1]) == kill
    }
    assert killed_in == set(range(EPOCHS)), (runs, killed_in)
    rows = logged(tmp_path, len(runs) - 1)
    link = resumed_from[-1]
    while link is not None:  # the chain of checkpoints the final run descends from
        gen, step = link
        rows += logged(tmp_path, gen, step)
        link = resumed_from[gen]
    got = Counter((int(epoch), sid) for epoch, _, _, sid, _ in rows)
    want = reference(sources)
    assert got == want, (runs, sorted((got - want).items())[:5], sorted((want - got).items())[:5])
    for epoch in range(EPOCHS):  # exact counts per source and epoch, no repeat before all
        per = Counter(
            sid.split(":")[0] for (e, sid), n in got.items() if e == epoch for _ in range(n)
        )
        assert dict(per) == QUOTAS
    # every batch (a gen, step and rank) of 64 holds each source's weight of it, to one sample
    batches: dict[tuple[str, str, str], Counter[str]] = {}
    for gen in range(len(runs)):
        for _, step, rank, sid, _ in logged(tmp_path, gen):
            batches.setdefault((str(gen), step, rank), Counter())[sid.split(":")[0]] += 1
    full = [b for b in batches.values() if sum(b.values()) == BATCH]
    assert len(full) >= EPOCHS * (PER_EPOCH - 1)
    for b in full:
        assert all(abs(b[name] - BATCH * w) < 1 for name, w in WEIGHTS.items()), b
    # every rank read through both of its workers (each killed run has 3 steps or more)
    readers = {row[4] for gen in range(len(runs)) for row in logged(tmp_path, gen)}
    assert readers == {f"{r}/{w}" for r in range(max(WORLDS)) for w in range(2)}
