"""A training loop killed with SIGKILL three times in one epoch resumes exactly (local)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from tests.resume.helpers import assert_exactly_once, write_shards
from tests.resume.sigkill import run_killed

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("seed", [0, 1])
def test_sigkill_three_times_local(tmp_path: Path, seed: int) -> None:
    urls, keys = write_shards(tmp_path, 8, 30)  # 240 samples, 40 steps of 6
    rng = random.Random(seed)
    kills = [rng.randint(2, 12) for _ in range(3)]
    delivered = run_killed(urls, tmp_path, kills, {})
    assert_exactly_once(delivered, keys)
