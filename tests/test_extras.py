"""The install extras of ``pyproject.toml`` keep their promises (README "Install", docs/decoding.md).

- ``[torch]`` and ``[all]``, what users install for training, bring simplejpeg (the fast JPEG
  path of ``wds_cloud/core/jpegdecode.py``), so they do not fall back to PIL by accident;
- ``[bench]``, what the benchmark commands install, brings every third-party module that a
  script under ``benchmarks/`` imports (the peers that ``bench_cloud.py --peers`` installs into
  their own virtual environments excepted);
- with simplejpeg installed, ``import wds_cloud`` still imports neither it nor torch.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
SELF = "wds_cloud"

# Import name -> the distribution that provides it, where the two differ.
DISTRIBUTION = {"PIL": "pillow", "yaml": "pyyaml", "botocore": "boto3"}
# Imported by benchmarks/ but installed elsewhere, with the reason.
NOT_IN_BENCH = {
    "litdata": "bench_cloud.py/bench_resume.py --peers: own venv, pip install litdata==0.2.76",
    "streaming": "bench_cloud.py/bench_resume.py --peers: own venv, mosaicml-streaming==0.13.0",
    "megatron": "bench_pack.py --energon: _energon_pack.py runs in its own venv, megatron-energon",
}
# Local modules: the benchmarks' own helpers and the repository's test servers.
LOCAL = {
    "_data",
    "_stores",
    "benchmarks",
    "tests",
    "latency_proxy",
    "bench_s3",
    "bench_latency",
    SELF,
}


def _project() -> dict[str, Any]:
    with open(ROOT / "pyproject.toml", "rb") as f:
        project: dict[str, Any] = tomllib.load(f)["project"]
    return project


def _name(requirement: str) -> str:
    """The normalised distribution name of a requirement string (PEP 503)."""
    match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
    assert match, requirement
    return re.sub(r"[-_.]+", "-", match.group(1)).lower()


def _self_extras(requirement: str) -> list[str]:
    match = re.fullmatch(rf"\s*{SELF}\[([^\]]*)\]\s*", requirement)
    return [e.strip() for e in match.group(1).split(",")] if match else []


def resolve(extra: str) -> set[str]:
    """Distribution names that ``pip install wds_cloud[extra]`` asks for directly: the base
    dependencies, the extra's own, and those of the ``wds_cloud[...]`` extras it names."""
    project = _project()
    extras: dict[str, list[str]] = project["optional-dependencies"]
    names = {_name(r) for r in project["dependencies"]}
    todo, seen = [extra], set()
    while todo:
        current = todo.pop()
        if current in seen:
            continue
        seen.add(current)
        assert current in extras, f"pyproject.toml has no extra [{current}]"
        for req in extras[current]:
            nested = _self_extras(req)
            if nested:
                todo.extend(nested)
            else:
                names.add(_name(req))
    return names


def test_resolve_follows_self_references_and_base_dependencies() -> None:
    assert "simplejpeg" in resolve("jpeg")
    assert "numpy" in resolve("jpeg")  # a base dependency
    assert {"boto3", "torch"} <= resolve("all")
    assert "simplejpeg" not in resolve("s3")  # a check that can fail
    with pytest.raises(AssertionError, match=r"no extra \[nope\]"):
        resolve("nope")


@pytest.mark.parametrize("extra", ["torch", "all", "bench"])
def test_training_extras_bring_the_fast_jpeg_decoder(extra: str) -> None:
    assert "simplejpeg" in resolve(extra), f"[{extra}] no longer brings simplejpeg"
    assert "torch" in resolve(extra)


def _third_party_imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), str(path))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module.split(".")[0])
    return {m for m in found if m not in sys.stdlib_module_names and m not in LOCAL}


def test_bench_brings_what_the_benchmarks_import() -> None:
    bench = resolve("bench")
    missing = {}
    for script in sorted((ROOT / "benchmarks").glob("*.py")):
        for module in _third_party_imports(script):
            if module in NOT_IN_BENCH:
                continue
            dist = _name(DISTRIBUTION.get(module, module))
            if dist not in bench:
                missing.setdefault(dist, []).append(script.name)
    assert not missing, f"[bench] does not install what these scripts import: {missing}"


def test_bench_pins_the_webdataset_the_tables_compare_against() -> None:
    extras = _project()["optional-dependencies"]
    assert "webdataset==1.0.2" in extras["bench"]


def test_import_wds_cloud_imports_neither_simplejpeg_nor_torch() -> None:
    pytest.importorskip("simplejpeg")
    code = (
        "import sys, wds_cloud\n"
        "leaked = {'simplejpeg', 'torch'} & set(sys.modules)\n"
        "assert not leaked, leaked\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode == 0, proc.stderr


def test_the_readme_says_exactly_what_bench_installs() -> None:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("\n## Benchmarks\n", 1)[1].split("\n## ", 1)[0]
    assert "```bash\npip install torch==2.13.0 -e '.[bench]'\n```" in section
    paragraph = section.split("`[bench]` is `[all]`", 1)[1].split("\n\n", 1)[0]
    said = {"ray": "Ray Data", "awscli": "`aws` CLI"}
    base = {_name(r) for r in _project()["dependencies"]}
    for dist in sorted(resolve("bench") - base):
        assert said.get(dist, dist) in paragraph, f"README's [bench] paragraph omits {dist}"
    for peer in ("LitData", "MosaicML Streaming"):
        assert peer in paragraph
