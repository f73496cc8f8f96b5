"""The seed workflow, examples/ais_pipeline.py, against the real AIStore 5.0 cluster:
directory -> ShardWriter -> dSort -> WebLoader -> training step.

The ETL step cannot run here: AIStore runs ETLs as Kubernetes pods, and this cluster has no
Kubernetes. The example runs with ``--no-etl`` (it prints why and does the ETL's resize and
trimap mapping in the loader); tests/examples/test_ais_pipeline.py runs the ETL step through
the emulator.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.servers.aistore import Cluster

aistore_sdk = pytest.importorskip("aistore.sdk")
pytest.importorskip("torch")

pytestmark = [pytest.mark.ais, pytest.mark.slow, pytest.mark.timeout(1800)]
ROOT = Path(__file__).resolve().parents[2]


def test_seed_workflow_on_the_real_cluster(ais_cluster: Cluster, tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("AIS_AUTHN_TOKEN", None)
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "examples" / "ais_pipeline.py"),
            "--endpoint",
            ais_cluster.endpoint,
            "--data",
            str(tmp_path / "pets"),
            "--samples",
            "200",
            "--workers",
            "2",
            "--epochs",
            "1",
            "--bucket",
            "seed-real",
            "--no-etl",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
        env=env,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    print(next(r for r in lines if r.get("etl") == "skipped")["reason"])
    written = next(r for r in lines if "written" in r and "summary" not in r)
    dsorted = next(r for r in lines if "dsort" in r)
    (epoch,) = [r for r in lines if "epoch" in r]
    summary = next(r["summary"] for r in lines if "summary" in r)
    assert written == {"written": 200, "shards": 8}  # 200 samples, maxcount 25
    assert dsorted["members"] == 3 * 200 and dsorted["shards"] >= 2  # jpg, png, cls each
    assert epoch["samples"] == 200 and epoch["steps"] == 4 and epoch["loss"] > 0
    assert summary["seen"] == 200
    # the cluster holds the uploaded and the shuffled shards
    client = aistore_sdk.Client(ais_cluster.endpoint)
    shuffled = client.bucket("seed-real-shuffled").list_objects().entries
    assert len(shuffled) == dsorted["shards"]
    assert len(client.bucket("seed-real").list_objects().entries) == 8
