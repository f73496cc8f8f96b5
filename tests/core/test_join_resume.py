"""A join read by ``make_loader`` with process workers, killed with SIGKILL and resumed: every
key delivered exactly once, each sample aligned, as in the uninterrupted run."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from tests.core.joinsets import make_sets, shard_keys
from tests.core.test_join import write_sets
from tests.resume.helpers import assert_exactly_once
from tests.resume.sigkill import run_killed

pytestmark = pytest.mark.slow

LOOP = Path(__file__).with_name("join_loop.py")


def test_make_loader_with_workers_reads_every_row_once(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    import wds_cloud as wds

    specs = write_sets(tmp_path, make_sets(6, 9))
    loader = wds.make_loader(
        wds.join(specs, columns=["img", "txt"]), batch_size=4, num_workers=2, collate=list
    )
    keys = [s["__key__"] for batch in loader for s in batch]
    assert_exactly_once(keys, [k for i in range(6) for k in shard_keys(i, 9)])


@pytest.mark.parametrize("seed", [0, 1])
def test_sigkill_resumes_exactly(tmp_path: Path, seed: int) -> None:
    pytest.importorskip("torch")
    specs = write_sets(tmp_path, make_sets(8, 10))  # 80 samples, 16 steps of 5
    expected = [k for i in range(8) for k in shard_keys(i, 10)]
    rng = random.Random(seed)
    kills = [rng.randint(2, 7) for _ in range(3)]
    (tmp_path / "killed").mkdir()
    (tmp_path / "full").mkdir()
    killed = run_killed([json.dumps(specs)], tmp_path / "killed", kills, {}, LOOP)
    assert not [k for k in killed if k.startswith("MISALIGNED")]
    assert_exactly_once(killed, expected)
    full = run_killed([json.dumps(specs)], tmp_path / "full", [], {}, LOOP)
    assert_exactly_once(full, expected)
