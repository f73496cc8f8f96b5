"""Smoke tests for ``benchmarks/bench_cloud.py`` (tiny loader table, no peers) and its proxy."""

from __future__ import annotations

import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from tests.support.http_server import HttpFileServer

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "bench_cloud.py"
sys.path.insert(0, str(ROOT / "benchmarks"))

from latency_proxy import LatencyProxy  # noqa: E402  (benchmarks/ is not a package)


@pytest.mark.slow
def test_tiny_loader_table(tmp_path: Path) -> None:
    cmd = [sys.executable, str(SCRIPT), "--samples", "64", "--rounds", "1", "--rows", "wds_cloud"]
    cmd += ["--data", str(tmp_path / "data")]
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = [line for line in done.stdout.splitlines() if line.startswith("| ")]
    assert rows[0] == "| | local disk | S3 (SeaweedFS on loopback) |"
    names = [row.split(" | ")[0].lstrip("| ") for row in rows[1:]]
    assert names == ["wds_cloud"]
    for row in rows[1:]:
        cells = row.strip("| ").split(" | ")[1:]
        assert all("samples" not in c and "MiB)" in c for c in cells), row  # rate (peak RSS)
        assert all(float(c.split(" ")[0].replace(",", "")) > 0 for c in cells), row


def test_latency_proxy_forwards_bytes_unchanged(tmp_path: Path) -> None:
    data = bytes(range(256)) * 4000
    (tmp_path / "f.bin").write_bytes(data)
    with (
        HttpFileServer(tmp_path) as server,
        LatencyProxy(server.port, delay=0.001, rate=20e6) as proxy,
    ):
        for _ in range(3):
            with urllib.request.urlopen(f"{proxy.url}/f.bin") as response:
                assert response.read() == data
            request = urllib.request.Request(f"{proxy.url}/f.bin", headers={"Range": "bytes=5-9"})
            with urllib.request.urlopen(request) as response:
                assert response.read() == data[5:10]
        assert proxy.requests == 6
