"""``wds-cloud bench --profile``, ``--trace`` and ``--plot``."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.observe.helpers import run_python
from tests.observe.test_trace import check_trace


def _bench(*args: str, path: str = "") -> subprocess.CompletedProcess[str]:
    return run_python("-m", "wds_cloud.cli", "bench", *args, path=path)


def test_bench_profile_prints_the_table_and_verdict_and_writes_a_trace(
    shard_dir: Path, tmp_path: Path
) -> None:
    trace = tmp_path / "trace.json"
    done = _bench(
        str(shard_dir / "shard-{00..03}.tar"),
        "--workers",
        "2",
        "--batch-size",
        "4",
        "--window",
        "4",
        "--profile",
        "--trace",
        str(trace),
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    assert "process      stage" in out and "workers (2)" in out
    verdicts = [line for line in out.splitlines() if line.startswith("verdict: ")]
    assert len(verdicts) == 1 and verdicts[0].split(": ")[1].split("-bound")[0] in (
        "consumer",
        "network",
        "decode",
        "compute",
        "parse",
        "transfer",
        "copy",
        "main-process",
    )
    assert f"trace written to {trace}" in out
    check_trace(json.loads(trace.read_text()))


def test_bench_json_carries_the_profile(shard_dir: Path) -> None:
    done = _bench(
        str(shard_dir / "shard-{00..03}.tar"),
        "--workers",
        "2",
        "--batch-size",
        "4",
        "--window",
        "4",
        "--profile",
        "--json",
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)
    profile = result["profile"]
    assert profile["verdict"] and profile["items"] == 40
    assert {p["role"] for p in profile["processes"]} == {"main", "worker 0", "worker 1"}
    assert len(result["timeline"]) == 10  # one point per window of 4 batches


def test_bench_plot_draws_a_png(shard_dir: Path, tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    png = tmp_path / "plot.png"
    done = _bench(
        str(shard_dir / "shard-{00..03}.tar"),
        "--workers",
        "2",
        "--batch-size",
        "4",
        "--window",
        "4",
        "--plot",
        str(png),
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "verdict: " in done.stdout  # --plot profiles too


def test_bench_plot_without_matplotlib_names_the_extra(shard_dir: Path, tmp_path: Path) -> None:
    """With matplotlib hidden (a module of that name that fails to import), the error names
    the ``[plot]`` extra."""
    hide = tmp_path / "hide"
    hide.mkdir()
    (hide / "matplotlib.py").write_text("raise ImportError('hidden for this test')\n")
    done = _bench(
        str(shard_dir / "shard-{00..03}.tar"),
        "--workers",
        "0",
        "--batch-size",
        "4",
        "--window",
        "4",
        "--plot",
        str(tmp_path / "p.png"),
        path=str(hide),
    )
    assert done.returncode != 0
    assert "pip install 'wds_cloud[plot]'" in done.stderr
