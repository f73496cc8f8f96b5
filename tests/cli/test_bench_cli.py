"""``bench`` with its defaults on one shard, the seed method's figures, and too-short runs."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest

from .conftest import NSHARDS, PER_SHARD, Runner

pytestmark = pytest.mark.slow  # each runs the CLI with DataLoader workers: seconds each


def test_defaults_on_one_shard(wds_cli: Runner, image_shards: list[Path]) -> None:
    out = wds_cli("bench", str(image_shards[0]))
    assert out.returncode == 0, out.stderr
    err = out.stderr.decode()
    assert "1 shard(s): using 1 worker(s) instead of 4" in err and "error" not in err
    text = out.stdout.decode()
    assert text.startswith("1 shards, 1 workers, batch size 64\n")
    lines = text.splitlines()
    # 6 samples: one partial batch, no full window of 100 batches: no rate from windows
    assert "window time mean" not in text and not any(x.startswith("MB/s") for x in lines)
    assert any(x.startswith("wall clock") and "samples/s" in x for x in lines)
    assert lines[-1].startswith("no window mean, variance or rate: the run was shorter than")


def test_defaults_json_on_one_shard(wds_cli: Runner, image_shards: list[Path]) -> None:
    out = wds_cli("bench", str(image_shards[0]), "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["config"]["num_workers"] == 1 and data["samples"] == PER_SHARD
    assert data["samples_per_s"] is None and data["mb_per_s"] is None
    assert data["window_mean"] is None and data["window_variance"] is None
    assert data["too_short"].startswith("the run was shorter than one full window")
    assert data["wall_samples_per_s"] == pytest.approx(PER_SHARD / data["seconds"])


def test_mean_and_variance_of_the_window_time(wds_cli: Runner, image_shards: list[Path]) -> None:
    args = ["bench", str(image_shards[0].parent) + "/", "--workers", "1", "--batch-size", "2"]
    data = json.loads(wds_cli(*args, "--window", "2", "--json").stdout)
    times = data["window_times"]
    assert data["batches"] == NSHARDS * PER_SHARD // 2 and len(times) == data["batches"] // 2
    assert data["too_short"] is None
    assert data["window_mean"] == pytest.approx(statistics.fmean(times[1:]))
    assert data["window_variance"] == pytest.approx(statistics.variance(times[1:]))
    assert data["samples_per_s"] > 0 and data["mb_per_s"] > 0
    text = wds_cli(*args, "--window", "2").stdout.decode()
    rows = {line.split("  ", 1)[0]: line for line in text.splitlines()[1:]}
    assert {"window time mean", "window time variance", "samples/s", "MB/s", "wall clock"} <= set(
        rows
    )
    assert "first dropped" in rows["window time mean"]


def test_workers_are_capped_at_the_shard_count(wds_cli: Runner, image_shards: list[Path]) -> None:
    spec = str(image_shards[0].parent) + "/"
    out = wds_cli("bench", spec, "--workers", "5", "--batch-size", "2", "--window", "1", "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["config"]["num_workers"] == NSHARDS
    assert f"{NSHARDS} shard(s): using {NSHARDS} worker(s) instead of 5" in out.stderr.decode()
    resampled = wds_cli("bench", spec, "--workers", "3", "--resampled", "--batches", "6",
                        "--batch-size", "2", "--window", "1", "--json")  # fmt: skip
    assert resampled.returncode == 0, resampled.stderr
    assert json.loads(resampled.stdout)["config"]["num_workers"] == 3
    assert b"instead of" not in resampled.stderr
