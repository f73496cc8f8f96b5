"""Fixtures of the webdataset compatibility tests: webdataset 0.2.86, the release code pinned to
``webdataset<=0.2.86`` runs, unpacked from PyPI into a temporary folder (never into the venv)."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

WEBDATASET_02 = "0.2.86"


@pytest.fixture(scope="session")
def webdataset_086(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder to put on ``PYTHONPATH`` that imports webdataset 0.2.86 as ``webdataset``.

    Downloaded with ``pip download`` (the wheel has no compiled parts); the test is skipped,
    saying why, only when the release cannot be had (no network, no index).
    """
    work = tmp_path_factory.mktemp("webdataset-0.2.86")
    pip = [sys.executable, "-m", "pip", "download", f"webdataset=={WEBDATASET_02}", "--no-deps"]
    done = subprocess.run(
        [*pip, "--only-binary", ":all:", "-d", str(work), "-q"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    wheels = sorted(work.glob("webdataset-*.whl"))
    if done.returncode != 0 or not wheels:
        pytest.skip(
            f"webdataset {WEBDATASET_02} cannot be downloaded: {done.stderr.strip()[-300:]}"
        )
    site = work / "site"
    with zipfile.ZipFile(wheels[0]) as wheel:
        wheel.extractall(site)
    return site
