"""examples/ais_pipeline.py as a subprocess against the AIStore emulator and the pets ETL."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.emulators.ais.server import AisEmulator
from tests.etl.conftest import ROOT, start_etl, stop_etl

pytestmark = [pytest.mark.ais, pytest.mark.slow]


@pytest.fixture
def pets_etl(ais_emulator: AisEmulator) -> Iterator[str]:
    proc, url = start_etl("etl.pets.server")
    try:
        ais_emulator.register_etl("pets-etl", url)
        yield url
    finally:
        stop_etl(proc)


@pytest.mark.parametrize("workers", [4])
def test_seed_workflow_end_to_end(
    ais_emulator: AisEmulator,
    pets_etl: str,
    tmp_path: Path,
    workers: int,
) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "examples" / "ais_pipeline.py"),
            "--endpoint",
            ais_emulator.url,
            "--data",
            str(tmp_path / "pets"),
            "--samples",
            "200",
            "--workers",
            str(workers),
            "--epochs",
            "2",
        ],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    written = next(r for r in lines if "written" in r and "summary" not in r)
    dsorted = next(r for r in lines if "dsort" in r)
    epochs = [r for r in lines if "epoch" in r]
    summary = next(r["summary"] for r in lines if "summary" in r)
    assert written == {"written": 200, "shards": 8}  # 200 samples, maxcount 25
    assert dsorted["members"] == 3 * 200 and dsorted["shards"] >= workers
    assert [e["samples"] for e in epochs] == [200, 200]  # every sample seen once per epoch
    assert all(e["steps"] == 4 and e["loss"] > 0 for e in epochs)  # 64+64+64+8
    assert summary["seen"] == 200 and summary["workers"] == workers
    # the data went through the ETL: the emulator relayed every shuffled shard to it, each epoch
    (info,) = [e for e in ais_emulator.etls.all() if e.name == "pets-etl"]
    assert info.obj_count == 2 * dsorted["shards"]
    # dSort really wrote the shuffled shards
    assert len(ais_emulator.store.list_objects("pets-seed-shuffled")) == dsorted["shards"]
