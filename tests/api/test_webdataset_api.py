"""The README's claim: webdataset 1.0.2's public names are here, at the top level and in its
modules (``wds.filters``, ``webdataset.cache`` after ``alias_webdataset()``), except the
implementation helpers docs/pipeline.md lists as not provided."""

from __future__ import annotations

import importlib
import inspect
import os
import subprocess
import sys
from pathlib import Path

import pytest
import webdataset

import wds_cloud as wds
from wds_cloud.errors import ShardNotFoundError
from wds_cloud.webdataset_api import WEBDATASET_MODULES, webdataset_module

ROOT = Path(__file__).resolve().parents[2]

# webdataset names deliberately not provided (docs/pipeline.md, "Compatibility with webdataset")
NOT_PROVIDED = {
    "": {"pytorch_weights_only"},
    "filters": {"combine_values", "pipeline"},
    "gopen": {
        "Pipe",
        "gopen_ais",
        "gopen_curl",
        "gopen_error",
        "gopen_file",
        "gopen_gsutil",
        "gopen_hf",
        "gopen_htgs",
        "gopen_pipe",
        "set_options",
    },
    "pipeline": {"add_length_method"},
    "shardlists": {"envlookup", "envsubst", "expand", "resampled_"},
    "tariterators": {"shardlist"},
    "tenbin": {
        "bytedata",
        "bytelen",
        "check_acceptable_input_type",
        "check_infos",
        "decode_chunks",
        "decode_header",
        "decode_list",
        "encode_chunks",
        "encode_header",
        "encode_list",
        "load",
        "read",
        "read_chunk",
        "roundup",
        "save",
        "str64",
        "unstr64",
        "write",
        "write_chunk",
    },
    "utils": {
        "ObsoleteException",
        "compute_sample_weights",
        "deprecated",
        "fnmatch_with_braces",
        "glob_with_braces",
        "lookup_sym",
        "obsolete",
        "repeatedly0",
        "safe_eval",
    },
    "writer": {"encode_based_on_extension1"},
}


def _public(module: object) -> set[str]:
    """Names a webdataset module defines (not what it imports from elsewhere)."""
    name = module.__name__  # type: ignore[attr-defined]
    return {
        n
        for n in dir(module)
        if not n.startswith("_")
        and not inspect.ismodule(getattr(module, n))
        and getattr(getattr(module, n), "__module__", None) == name
    }


def test_every_top_level_name_is_here() -> None:
    # (submodules are checked below; which of them show up here depends on import order)
    names = {
        n
        for n in dir(webdataset)
        if not n.startswith("_") and not inspect.ismodule(getattr(webdataset, n))
    }
    missing = sorted(n for n in names - NOT_PROVIDED[""] if not hasattr(wds, n))
    assert missing == []


@pytest.mark.parametrize("module", sorted(WEBDATASET_MODULES))
def test_every_module_name_is_here(module: str) -> None:
    theirs = _public(importlib.import_module(f"webdataset.{module}"))
    facade = webdataset_module(module)
    ours = set(WEBDATASET_MODULES[module])
    assert sorted(theirs - ours - NOT_PROVIDED.get(module, set())) == []
    for name in ours:
        assert getattr(facade, name) is not None, name
    if module == "gopen":  # as in webdataset, wds.gopen is the function, not the module
        assert callable(wds.gopen) and wds.gopen is facade.gopen
    elif module == "pytorch":  # wds.pytorch is wds_cloud's torch layer, holding the same names
        assert all(getattr(wds.pytorch, n) is getattr(facade, n) for n in ours)
    else:
        assert getattr(wds, module) is facade
    with pytest.raises(AttributeError, match=rf"webdataset\.{module}\.nope is not part"):
        _ = facade.nope


def test_not_provided_names_really_are_not() -> None:
    for module, names in NOT_PROVIDED.items():
        target = wds if not module else webdataset_module(module)
        for name in names:
            assert not hasattr(target, name), (module, name)


def test_alias_runs_webdataset_imports_unchanged(tmp_path: Path) -> None:
    code = (
        "from wds_cloud.webdataset_api import alias_webdataset\n"
        "alias_webdataset()\n"
        "import webdataset as wds\n"
        "from webdataset.cache import LRUCleanup\n"
        "from webdataset.filters import batched, default_collation_fn\n"
        "from webdataset import gopen, autodecode\n"
        "import wds_cloud\n"
        "assert wds is wds_cloud and callable(gopen)\n"
        "assert wds.utils.enforce_security is False\n"
        "wds.utils.enforce_security = True\n"
        "from wds_cloud.security import secure_mode\n"
        "assert secure_mode()\n"
        "print(autodecode.ImageHandler.__module__, batched.__module__)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("WDS_SECURE", None)
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["wds_cloud.core.imagedecode", "wds_cloud.core.batching"]


def test_alias_refuses_when_webdataset_is_already_imported() -> None:
    code = (
        "import webdataset\n"
        "from wds_cloud.webdataset_api import alias_webdataset\n"
        "alias_webdataset()\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert done.returncode == 1
    assert "the webdataset package is already imported" in done.stderr


def test_a_missing_shard_fails_when_read_not_when_the_dataset_is_built(tmp_path: Path) -> None:
    """webdataset's ``test_missing_throws``: ``WebDataset(missing)`` builds; iterating raises an
    ``IOError`` (here ``ShardNotFoundError``, a ``FileNotFoundError``) that names the path."""
    path = str(tmp_path / "missing.tar")
    ds = wds.WebDataset(path, shardshuffle=False)
    with pytest.raises(FileNotFoundError, match=r"missing\.tar") as err:
        for _ in ds:
            pass
    assert isinstance(err.value, ShardNotFoundError) and err.value.url == path
