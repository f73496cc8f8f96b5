"""Run webdataset 1.0.2's own test suite against wds_cloud (``webdataset`` aliased to it).

One command, from the repository root::

    python benchmarks/webdataset_suite.py                 # both runs, summary table
    python benchmarks/webdataset_suite.py --source DIR    # tests from a webdataset 1.0.2 checkout
    python benchmarks/webdataset_suite.py --json out.json

What it does:

1. Gets the tests. ``--source DIR`` takes ``DIR/tests`` (and ``DIR/testdata`` when present) from a
   webdataset checkout at the 1.0.2 release. Without it, the script downloads webdataset's 1.0.2
   source distribution from PyPI with ``pip download`` (cached under ``--work``); when that fails
   (no network) it says so and exits 0 without running anything: nothing here is vendored, and
   CI never depends on it.
2. Gets the test data. The source distribution carries ``tests/`` but neither ``tests/conftest.py``
   nor ``testdata/``; the script writes the few helpers the tests import from ``tests.conftest``
   (same names and behaviour) and generates stand-ins for the data files it lacks:
   ``imagenet-000000.tgz`` (47 samples of ``cls``/``png``/``wnid``/``xml``, the first PNG
   793x600 RGB as the tests expect), ``compressed.tar`` (three ``.txt.gz`` members) and
   ``tendata.tar`` (100 ``.ten`` members of two float64 28x28 arrays).
3. Runs the suite twice in subprocesses, once against the real ``webdataset`` package (the
   reference: it tells which tests can run on this machine with this data at all) and once with
   ``webdataset`` aliased to wds_cloud (:func:`wds_cloud.webdataset_api.alias_webdataset`).
   Tests that read webdataset's remote shards (``remote_loc``, ``remote_sample``, ...) are
   deselected in both runs; other tests that need the internet fail against webdataset here
   too and are reported as "not runnable here".
4. Reports the compatibility figures: of the tests that pass against webdataset itself, the
   share that passes against wds_cloud, for those that use only public names, for those that
   import ``_private`` names (``from webdataset.filters import _shuffle``: 31 tests of
   ``test_filters.py``, counted since the private names copied training code imports work
   through the alias), and for both together; and every failing test with the first line of
   its error. ``docs/pipeline.md`` lists each remaining failure and why.
"""

from __future__ import annotations

import argparse
import ast
import gzip
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VERSION = "1.0.2"
REMOTE_NAMES = {"remote_loc", "remote_shards", "remote_shard", "remote_pattern", "remote_sample"}

# What the tests import from tests.conftest (the source distribution lacks that file).
CONFTEST = '''"""Helpers webdataset's tests import from tests.conftest (written by webdataset_suite.py)."""


def pytest_configure(config):
    config.addinivalue_line("markers", "quick: quick test")
    config.addinivalue_line("markers", "notorch: does not need torch")


def count_samples_tuple(source, *args, n=10000):
    count = 0
    for i, sample in enumerate(iter(source)):
        if i >= n:
            break
        assert isinstance(sample, (tuple, dict, list)), (type(sample), sample)
        for f in args:
            assert f(sample)
        count += 1
    return count


local_data = "testdata/imagenet-000000.tgz"
compressed = "testdata/compressed.tar"
remote_loc = "http://storage.googleapis.com/webdataset/openimages/"
remote_shards = "openimages-train-0000{00..99}.tar"
remote_shard = "openimages-train-000321.tar"
remote_pattern = "openimages-train-{}.tar"
remote_sample = "http://storage.googleapis.com/webdataset/testdata/sample.tgz"
'''

ALIAS_CONFTEST = '''"""Alias webdataset to wds_cloud before any test module imports it."""
from wds_cloud.webdataset_api import alias_webdataset

alias_webdataset()
'''


# ---------------------------------------------------------------------------------------------
# getting the tests and the data


def fetch_sdist(work: Path) -> Path | None:
    """webdataset's source distribution, unpacked under ``work``; None when it cannot be had."""
    unpacked = work / f"webdataset-{VERSION}"
    if (unpacked / "tests").is_dir():
        return unpacked
    download = work / "download"
    download.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "pip", "download", f"webdataset=={VERSION}", "--no-deps"]
    command += ["--no-binary", ":all:", "-d", str(download), "-q"]
    done = subprocess.run(command, capture_output=True, text=True)
    archives = sorted(download.glob(f"webdataset-{VERSION}.tar.gz"))
    if done.returncode != 0 or not archives:
        print(f"could not download webdataset {VERSION} from PyPI:\n{done.stderr.strip()}")
        return None
    with tarfile.open(archives[0]) as archive:
        archive.extractall(work, filter="data")
    return unpacked


def png_bytes(width: int, height: int, seed: int) -> bytes:
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(seed)
    pixels = rng.integers(0, 256, size=(height, width, 3), dtype=np.uint8)
    out = io.BytesIO()
    Image.fromarray(pixels).save(out, format="PNG")
    return out.getvalue()


def add_member(archive: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mtime = 1_600_000_000
    archive.addfile(info, io.BytesIO(data))


def write_imagenet_standin(path: Path) -> None:
    """47 samples like webdataset's imagenet-000000.tgz: cls, png, wnid, xml; first PNG 793x600."""
    with tarfile.open(path, "w:gz", format=tarfile.USTAR_FORMAT) as archive:
        for i in range(47):
            key = f"n{3000000 + i:08d}_{1000 + i}"
            width, height = (600, 793) if i == 0 else (64 + (i * 37) % 200, 48 + (i * 53) % 180)
            wnid = f"n{3000000 + i % 7:08d}"
            note = ET.Element("annotation")
            ET.SubElement(note, "filename").text = key
            add_member(archive, f"{key}.cls", str(i % 7).encode())
            add_member(archive, f"{key}.png", png_bytes(width, height, seed=i))
            add_member(archive, f"{key}.wnid", wnid.encode())
            add_member(archive, f"{key}.xml", ET.tostring(note))


def write_compressed_standin(path: Path) -> None:
    with tarfile.open(path, "w", format=tarfile.USTAR_FORMAT) as archive:
        for i, text in enumerate((b"hello\n", b"world\n", b"gzip\n"), start=1):
            add_member(archive, f"compressed/{i:04d}.txt.gz", gzip.compress(text, mtime=0))


def write_tendata_standin(path: Path) -> None:
    """100 samples with a ``.ten`` member: two float64 28x28 arrays in tenbin format."""
    import numpy as np

    sys.path.insert(0, str(ROOT))
    from wds_cloud.core.tenbin import encode_buffer

    rng = np.random.default_rng(0)
    with tarfile.open(path, "w", format=tarfile.USTAR_FORMAT) as archive:
        for i in range(100):
            arrays = [rng.random((28, 28)), rng.random((28, 28))]
            add_member(archive, f"{i:06d}.ten", encode_buffer(arrays))


STANDINS = {
    "imagenet-000000.tgz": write_imagenet_standin,
    "compressed.tar": write_compressed_standin,
    "tendata.tar": write_tendata_standin,
}


def prepare(run: Path, source: Path) -> list[str]:
    """A directory to run the suite in; returns the names of the generated stand-in files."""
    if run.exists():
        shutil.rmtree(run)
    shutil.copytree(source / "tests", run / "tests")
    (run / "tests" / "__init__.py").touch()
    if not (run / "tests" / "conftest.py").exists():
        (run / "tests" / "conftest.py").write_text(CONFTEST)
    testdata = run / "testdata"
    if (source / "testdata").is_dir():
        shutil.copytree(source / "testdata", testdata)
    testdata.mkdir(exist_ok=True)
    generated = []
    for name, write in STANDINS.items():
        if not (testdata / name).exists():
            write(testdata / name)
            generated.append(name)
    (run / "pytest.ini").write_text("[pytest]\naddopts = -p no:cacheprovider\n")
    return generated


# ---------------------------------------------------------------------------------------------
# classifying tests


@dataclass
class TestInfo:
    nodeid: str
    internet: bool
    private: bool


def _uses_remote(node: ast.AST) -> bool:
    return any(isinstance(sub, ast.Name) and sub.id in REMOTE_NAMES for sub in ast.walk(node))


def _private_imports(tree: ast.Module) -> set[str]:
    """Underscore names the module imports from webdataset."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("webdataset"):
            names |= {a.asname or a.name for a in node.names if a.name.startswith("_")}
    return names


def _uses_private(node: ast.AST, private: set[str]) -> bool:
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name) and sub.id in private:
            return True
        if (
            isinstance(sub, ast.Attribute)
            and sub.attr.startswith("_")
            and not sub.attr.startswith("__")
        ):
            base = sub.value
            while isinstance(base, ast.Attribute):
                base = base.value
            if isinstance(base, ast.Name) and base.id in {"wds", "webdataset"}:
                return True
    return False


def _test_functions(body: list[ast.stmt], prefix: str = "") -> list[tuple[str, ast.FunctionDef]]:
    """(``[Class::]name``, node) of every test function, test classes included."""
    found = []
    for node in body:
        if isinstance(node, ast.ClassDef):
            found += _test_functions(node.body, f"{prefix}{node.name}::")
        elif isinstance(node, ast.FunctionDef) and node.name.startswith("test"):
            found.append((f"{prefix}{node.name}", node))
    return found


def classify(tests_dir: Path) -> dict[str, TestInfo]:
    """Each test function (by ``file::[Class::]name``): does it need the internet or private names?"""
    infos = {}
    for path in sorted(tests_dir.glob("test_*.py")):
        tree = ast.parse(path.read_text())
        private = _private_imports(tree)
        # helper functions that read remote shards make their callers remote too
        remote_helpers = {
            n.name
            for n in tree.body
            if isinstance(n, ast.FunctionDef) and not n.name.startswith("test") and _uses_remote(n)
        }
        for name, node in _test_functions(tree.body):
            called = {s.id for s in ast.walk(node) if isinstance(s, ast.Name)}
            nodeid = f"tests/{path.name}::{name}"
            infos[nodeid] = TestInfo(
                nodeid=nodeid,
                internet=_uses_remote(node) or bool(called & remote_helpers),
                private=_uses_private(node, private),
            )
    return infos


# ---------------------------------------------------------------------------------------------
# running


@dataclass
class Outcome:
    passed: set[str] = field(default_factory=set)
    failed: dict[str, str] = field(default_factory=dict)  # base nodeid -> first error line
    skipped: set[str] = field(default_factory=set)


def _base(nodeid: str) -> str:
    return nodeid.split("[", 1)[0]


def run_suite(run: Path, target: str, deselect: list[str], timeout: int) -> Outcome:
    """Run pytest in ``run`` against ``target`` ("webdataset" or "wds_cloud")."""
    conftest = run / "conftest.py"
    if target == "wds_cloud":
        conftest.write_text(ALIAS_CONFTEST)
    elif conftest.exists():
        conftest.unlink()
    report = run / f"report-{target}.xml"
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(run), str(ROOT), env.get("PYTHONPATH", "")])
    env.pop("WDS_SECURE", None)
    command = [sys.executable, "-m", "pytest", "tests", "-q", "-o", "timeout=120"]
    command += [f"--junitxml={report}", "--continue-on-collection-errors"]
    for nodeid in deselect:
        command += ["--deselect", nodeid]
    subprocess.run(command, cwd=run, env=env, timeout=timeout, capture_output=True)
    outcome = Outcome()
    for case in ET.parse(report).getroot().iter("testcase"):
        module = case.get("classname", "").replace(".", "/")
        parts = module.split("/")
        # classname is "tests.test_x" or "tests.test_x.TestClass"
        if parts[-1].startswith("Test"):
            nodeid = f"{'/'.join(parts[:-1])}.py::{parts[-1]}::{case.get('name')}"
        else:
            nodeid = f"{module}.py::{case.get('name')}"
        base = _base(nodeid)
        problem = case.find("failure")
        if problem is None:
            problem = case.find("error")
        if problem is not None:
            message = (problem.get("message") or problem.text or "").strip().splitlines()
            outcome.failed.setdefault(base, message[0][:200] if message else "")
        elif case.find("skipped") is not None:
            outcome.skipped.add(base)
        else:
            outcome.passed.add(base)
    outcome.passed -= set(outcome.failed)  # a parametrised test passes only when every case does
    return outcome


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--source", type=Path, help="a webdataset 1.0.2 checkout (tests/, testdata/)"
    )
    parser.add_argument("--work", type=Path, default=ROOT / "bench_data" / "webdataset_suite")
    parser.add_argument("--json", type=Path, help="write the figures and failures here")
    parser.add_argument("--timeout", type=int, default=1800, help="per run, seconds")
    args = parser.parse_args(argv)

    args.work.mkdir(parents=True, exist_ok=True)
    source = args.source or fetch_sdist(args.work)
    if source is None:
        print("skipped: webdataset's tests are not available (no --source, no network)")
        return 0
    run = Path(tempfile.mkdtemp(prefix="wds-suite-"))
    try:
        generated = prepare(run, source)
        infos = classify(run / "tests")
        internet = sorted(i.nodeid for i in infos.values() if i.internet)
        reference = run_suite(run, "webdataset", internet, args.timeout)
        ours = run_suite(run, "wds_cloud", internet, args.timeout)
    finally:
        shutil.rmtree(run, ignore_errors=True)

    public = {n for n, i in infos.items() if not i.private and not i.internet}
    runnable = sorted(public & reference.passed)
    passing = [n for n in runnable if n in ours.passed]
    failing = {
        n: ours.failed.get(n, "skipped" if n in ours.skipped else "not run")
        for n in runnable
        if n not in ours.passed
    }
    not_runnable = {
        n: reference.failed.get(n, "skipped") for n in sorted(public - reference.passed)
    }
    share = 100.0 * len(passing) / max(1, len(runnable))

    print(f"webdataset {VERSION} test suite, tests from {source}")
    if generated:
        print(f"stand-in test data generated: {', '.join(generated)}")
    print(
        f"test functions: {len(infos)}; need the internet: {len(internet)}; "
        f"use private names: {sum(i.private and not i.internet for i in infos.values())}"
    )
    print(
        f"public-name tests that pass against webdataset itself: {len(runnable)} "
        f"(not runnable here: {len(not_runnable)})"
    )
    print(f"of those, passing against wds_cloud: {len(passing)} = {share:.1f} %")
    for nodeid, why in not_runnable.items():
        print(f"  not runnable here: {nodeid}: {why}")
    for nodeid, why in failing.items():
        print(f"  FAILS on wds_cloud: {nodeid}: {why}")
    private_results = {
        n: n in ours.passed for n, i in infos.items() if i.private and not i.internet
    }
    private_runnable = sorted(n for n in private_results if n in reference.passed)
    private_passing = [n for n in private_runnable if private_results[n]]
    for nodeid in private_runnable:
        if not private_results[nodeid]:
            failing[nodeid] = ours.failed.get(nodeid, "skipped" if nodeid in ours.skipped else "not run")  # fmt: skip
            print(f"  FAILS on wds_cloud: {nodeid}: {failing[nodeid]}")
    both = len(passing) + len(private_passing)
    both_runnable = len(runnable) + len(private_runnable)
    both_share = 100.0 * both / max(1, both_runnable)
    print(
        f"private-name tests that pass against webdataset itself: {len(private_runnable)}; "
        f"passing against wds_cloud: {len(private_passing)}"
    )
    print(f"all runnable tests passing against wds_cloud: {both} of {both_runnable} = {both_share:.1f} %")  # fmt: skip
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "source": str(source),
                    "generated_testdata": generated,
                    "tests": len(infos),
                    "internet": internet,
                    "runnable": runnable,
                    "not_runnable": not_runnable,
                    "passing": passing,
                    "failing": failing,
                    "share_percent": round(share, 1),
                    "private": private_results,
                    "private_runnable": private_runnable,
                    "private_passing": private_passing,
                    "all_share_percent": round(both_share, 1),
                },
                indent=1,
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
