"""bench_loader / bench_urls: structure and consistency of the numbers (no timing thresholds)."""

from __future__ import annotations

import json

import pytest

from wds_cloud.errors import ConfigError
from wds_cloud.tools.bench import BenchResult, bench_loader, bench_urls

from .conftest import NSHARDS, PER_SHARD

TOTAL = NSHARDS * PER_SHARD


def test_bench_urls_counts_every_sample_and_payload_byte(
    bench_shards: tuple[list[str], int],
) -> None:
    urls, payload = bench_shards
    result = bench_urls(urls, batch_size=4, num_workers=2, window=3, fields=["bin", "cls"])
    assert result.batches == TOTAL // 4
    assert result.samples == TOTAL
    assert result.nbytes == payload
    assert len(result.window_times) == result.batches // 3
    assert all(t > 0 for t in result.window_times)
    assert result.window_mean > 0 and result.window_variance >= 0
    assert result.samples_per_s > 0 and result.mb_per_s is not None and result.mb_per_s > 0
    assert result.step_window_mean is None  # no step: no comparison
    assert result.config["num_workers"] == 2
    data = json.loads(result.to_json())
    assert data["samples"] == TOTAL and data["window"] == 3
    assert "samples/s" in result.table()


def test_step_sees_batches_without_the_byte_column(bench_shards: tuple[list[str], int]) -> None:
    urls, _ = bench_shards
    seen: list[int] = []

    def step(batch: tuple) -> None:
        assert len(batch) == 2  # bin, cls: __nbytes__ stripped
        seen.append(len(batch[1]))

    result = bench_urls(
        urls, batch_size=10, num_workers=0, window=2, fields=["bin", "cls"], step=step
    )
    # the loader pass, then the same number of steps on the cached first batch
    assert sum(seen[: result.batches]) == TOTAL
    assert len(seen) == 2 * result.batches
    assert result.step_window_mean is not None and result.step_window_mean > 0
    assert result.loader_to_step_ratio is not None and result.loader_to_step_ratio > 0
    assert "loader/step" in result.table()


def test_dict_samples_and_batch_limit(bench_shards: tuple[list[str], int]) -> None:
    urls, _ = bench_shards
    result = bench_urls(urls, batch_size=5, num_workers=0, batches=4, window=100)
    assert result.batches == 4 and result.samples == 20
    assert result.nbytes is not None and result.nbytes > 20 * 100
    assert result.window_times == []  # fewer batches than one window
    # too short to measure: no window figure, no rate; the wall clock only
    assert result.window_mean is None and result.window_variance is None
    assert result.samples_per_s is None and result.mb_per_s is None
    assert result.too_short is not None and "shorter than one full window" in result.too_short
    assert result.wall_samples_per_s == pytest.approx(20 / result.seconds)
    assert result.wall_mb_per_s == pytest.approx(result.nbytes / 1e6 / result.seconds)
    table = result.table()
    assert "samples/s" in table and "window time mean" not in table
    assert table.splitlines()[-1].startswith("no window mean, variance or rate: the run was")


def test_bench_loader_on_any_iterable_first_window_dropped() -> None:
    batches = [[0] * 8 for _ in range(10)]
    result = bench_loader(batches, window=2, nbytes=lambda b: 1000)
    assert isinstance(result, BenchResult)
    assert result.batches == 10 and result.samples == 80 and result.nbytes == 10_000
    assert len(result.window_times) == 5
    # mean over windows 2..5 only
    assert result.window_mean == pytest.approx(sum(result.window_times[1:]) / 4)


def test_one_window_is_too_short_the_first_is_warm_up() -> None:
    result = bench_loader([[0] * 4 for _ in range(3)], window=2, nbytes=lambda b: 10)
    assert len(result.window_times) == 1 and result.too_short is not None
    assert result.samples_per_s is None and result.wall_samples_per_s > 0
    two = bench_loader([[0] * 4 for _ in range(4)], window=2, nbytes=lambda b: 10)
    assert two.too_short is None and two.window_mean == pytest.approx(two.window_times[1])
    assert two.window_variance == 0.0  # one measured window


def test_too_short_run_has_no_step_comparison() -> None:
    calls: list[int] = []
    result = bench_loader([[0] * 4 for _ in range(3)], window=2, step=lambda b: calls.append(1))
    assert result.too_short is not None and len(calls) == 3  # the loader pass only
    assert result.step_window_mean is None and result.loader_to_step_ratio is None
    assert "step-only" not in result.table()


def test_windows_that_a_prefetch_queue_could_serve_are_too_short() -> None:
    batches = [[0] * 4 for _ in range(5)]
    result = bench_loader(batches, window=1, prefetched=4)
    assert len(result.window_times) == 5  # 4 measured batches <= 4 prefetched
    assert result.too_short is not None and "ready in advance" in result.too_short
    assert result.samples_per_s is None and result.loader_to_step_ratio is None
    ok = bench_loader(batches, window=1, prefetched=3)
    assert ok.too_short is None and ok.samples_per_s is not None and ok.samples_per_s > 0


def test_table_names_the_mean_and_the_variance() -> None:
    result = bench_loader([[0] * 4 for _ in range(6)], window=2, nbytes=lambda b: 10)
    rows = dict(line.split("  ", 1) for line in result.table().splitlines())
    assert rows["window time mean"].strip().startswith(f"{result.window_mean:.4f} s")
    assert rows["window time variance"].strip() == f"{result.window_variance:.3g} s^2"


def test_bench_loader_without_nbytes_reports_no_mb() -> None:
    result = bench_loader([[1, 2]] * 3, window=1)
    assert result.nbytes is None and result.mb_per_s is None
    assert "-" in result.table()


def test_bench_errors() -> None:
    with pytest.raises(ConfigError, match="window"):
        bench_loader([[1]], window=0)
    with pytest.raises(ConfigError, match="no batch"):
        bench_loader([], window=1)
