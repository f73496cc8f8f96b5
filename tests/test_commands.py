"""The README's two commands: ``.ci/run`` runs the test command verbatim, and requires the real
AIStore tests to run (a skip there would hide a missing install step)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    return re.findall(r"```bash\n(python3 -m venv [^\n]+)\n```", text)


def test_the_readme_starts_with_the_demo_and_the_test_command() -> None:
    commands = _readme_commands()
    assert len(commands) >= 2
    assert commands[0].endswith("wds-cloud demo")
    assert commands[1].endswith("python -m pytest")


def test_ci_runs_the_readme_test_command_verbatim_requiring_the_real_cluster() -> None:
    script = (ROOT / ".ci" / "run").read_text().splitlines()
    test_command = _readme_commands()[1]
    assert test_command in script
    assert "export WDS_CLOUD_REQUIRE_REAL_AIS=1" in " ".join(script).split(test_command)[0]
    assert "python -m tests.servers.aistore build" in test_command
