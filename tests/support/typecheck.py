"""Run mypy on a user's snippet against the source tree (tests of the typed public surface)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def run_mypy(
    tmp_path: Path, source: str, *, strict: bool = False
) -> subprocess.CompletedProcess[str]:
    """mypy on ``source`` as a user would run it (``strict`` for the user's own code only:
    wds_cloud's modules are checked by the project's own mypy settings, not reported here)."""
    pytest.importorskip("mypy")
    (tmp_path / "snippet.py").write_text(source)
    config = "[mypy]\nignore_missing_imports = True\n"
    if strict:
        config += "strict = True\n\n[mypy-wds_cloud.*]\nignore_errors = True\n"
    (tmp_path / "mypy.ini").write_text(config)
    env = dict(os.environ, MYPYPATH=str(ROOT))  # the source tree, not the editable-install hook
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", "mypy.ini", "snippet.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
