"""The layers of ``wds_cloud`` and the import paths that moved.

Layers, bottom to top: foundation < openers < core < resume/index/writing <
pytorch/jobs/aistore/tools/sagemaker < cli. A module imports only from its own layer or those
below; the few imports that run back up are listed in :data:`ALLOWED_UP` with their reason.
Read from the source with ``ast`` (the import graph of ``tests/test_structure.py``: lazy and
typing-only imports count).
"""

from __future__ import annotations

import importlib
import sys
import warnings

import pytest

from tests.test_structure import import_graph, module_files
from wds_cloud.reexport import MOVED

LAYERS: list[tuple[str, tuple[str, ...]]] = [
    (
        "foundation",
        (
            "wds_cloud.braces",
            "wds_cloud.errors",
            "wds_cloud.observe",
            "wds_cloud.redact",
            "wds_cloud.reexport",
            "wds_cloud.security",
            "wds_cloud.settings",
            "wds_cloud.urls",
        ),
    ),
    ("openers", ("wds_cloud.listing", "wds_cloud.openers")),
    ("core", ("wds_cloud.core",)),
    ("resume/index/writing", ("wds_cloud.index", "wds_cloud.resume", "wds_cloud.writing")),
    (
        "pytorch/jobs/aistore/tools/sagemaker",
        (
            "wds_cloud.aistore",
            "wds_cloud.jobs",
            "wds_cloud.pytorch",
            "wds_cloud.ray",
            "wds_cloud.sagemaker",
            "wds_cloud.tools",
        ),
    ),
    ("cli", ("wds_cloud.cli", "wds_cloud.demo", "wds_cloud.webdataset_api")),
]

# (importer, imported) -> why this import runs back up
ALLOWED_UP: dict[tuple[str, str], str] = {
    ("wds_cloud.core.pipeline", "wds_cloud.resume"): (
        "DataPipeline.state_dict()/load_state_dict()/iteration under a resume state are the "
        "pipeline's public methods (webdataset's object shape); resume/ is built on core's "
        "stages, so these methods import it when called"
    ),
    ("wds_cloud.core.pipeline", "wds_cloud.resume.loop"): "as above: the resumed iteration",
    ("wds_cloud.core.datasets", "wds_cloud.resume.state"): (
        "WebDataset.state_dict()/load_state_dict(): the state format and its check, on call"
    ),
    ("wds_cloud.core.mix", "wds_cloud.resume.state"): (
        "RandomMix.state_dict()/load_state_dict(): the state format and its check, on call"
    ),
    ("wds_cloud.listing", "wds_cloud.index.datasetjson"): (
        "a shard spec naming a dataset index JSON stands for its shards (and WebDataset's "
        "length): the one shard-spec resolver reads it, lazily and only for a .json spec, "
        "through the format's one reader and owner, which imports only openers and the "
        "foundation (no cycle)"
    ),
}


def layer_of(module: str) -> int:
    """The layer index of ``module`` (the longest matching prefix wins)."""
    best: tuple[int, int] | None = None
    for index, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and (
                best is None or len(prefix) > best[1]
            ):
                best = (index, len(prefix))
    if best is None:
        raise AssertionError(f"{module} is in no layer: add it to LAYERS in {__file__}")
    return best[0]


def upward_imports(graph: dict[str, set[str]]) -> list[tuple[str, str]]:
    """``(importer, imported)`` for every import into a higher layer; moved-path shims left
    out (each only re-exports its new module)."""
    found = []
    for module, deps in sorted(graph.items()):
        if module in MOVED:
            continue
        for dep in sorted(deps - set(MOVED)):
            if layer_of(dep) > layer_of(module):
                found.append((module, dep))
    return found


def test_every_module_has_a_layer() -> None:
    for module in module_files():
        if module != "wds_cloud" and module not in MOVED:
            layer_of(module)


def test_no_import_runs_back_up_a_layer() -> None:
    found = [pair for pair in upward_imports(import_graph()) if pair not in ALLOWED_UP]
    assert not found, "imports into a higher layer:\n" + "\n".join(
        f"{a} ({LAYERS[layer_of(a)][0]}) -> {b} ({LAYERS[layer_of(b)][0]})" for a, b in found
    )


def test_allowed_exceptions_are_still_needed() -> None:
    stale = set(ALLOWED_UP) - set(upward_imports(import_graph()))
    assert not stale, f"no longer imported, remove from ALLOWED_UP: {sorted(stale)}"


def test_the_layer_check_sees_an_upward_import() -> None:
    graph = {"wds_cloud.core.x": {"wds_cloud.cli.y"}, "wds_cloud.cli.y": {"wds_cloud.core.x"}}
    assert upward_imports(graph) == [("wds_cloud.core.x", "wds_cloud.cli.y")]


@pytest.mark.parametrize("backend", ["ais", "azure", "gcs", "http", "s3"])
def test_every_backend_has_the_same_rooms(backend: str) -> None:
    files = module_files()
    for room in ("opener", "config", "errors", "read", "prefetch"):
        assert f"wds_cloud.openers.{backend}.{room}" in files, (backend, room)


@pytest.mark.parametrize("backend", ["ais", "azure", "gcs", "http", "s3"])
def test_a_backend_package_imports_no_sdk_until_its_opener_is_used(backend: str) -> None:
    """Importing ``openers.<backend>.config`` leaves the opener (and the SDK) unimported; the
    package's public names still resolve, from the opener."""
    import subprocess

    code = (
        f"import sys, wds_cloud.openers.{backend}.config as c\n"
        f"assert 'wds_cloud.openers.{backend}.opener' not in sys.modules\n"
        f"import wds_cloud.openers.{backend} as p\n"
        "for name in p.__all__:\n"
        "    getattr(p, name)\n"
        f"assert 'wds_cloud.openers.{backend}.opener' in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize(("old", "new"), sorted(MOVED.items()))
def test_a_moved_path_still_imports_and_warns(old: str, new: str) -> None:
    for name in [m for m in sys.modules if m == old or m.startswith(old + ".")]:
        del sys.modules[name]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        module = importlib.import_module(old)
    messages = [str(w.message) for w in caught if issubclass(w.category, DeprecationWarning)]
    assert any(old in m and new in m for m in messages), messages
    target = importlib.import_module(new)
    public = getattr(target, "__all__", None) or [n for n in vars(target) if n[0] != "_"]
    for name in public:
        assert getattr(module, name) is getattr(target, name), (old, name)


def test_python_m_of_the_old_demo_path_still_runs_the_demo(tmp_path: object) -> None:
    import subprocess

    command = [sys.executable, "-W", "always", "-m", "wds_cloud.demo", "--dir", str(tmp_path)]
    result = subprocess.run(
        [*command, "--samples", "20"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "wrote 20 samples" in result.stdout
    assert "wds_cloud.demo moved to wds_cloud.cli.demo" in result.stderr
