"""What type checkers see of ``import wds_cloud``: the real names, not ``Any``.

The package exports names lazily (``_EXPORTS``); a ``TYPE_CHECKING`` block mirrors that table
for type checkers. These tests keep the two equal and run mypy on a user's snippet: a misspelt
name fails, and the fluid methods keep the dataset's type (``Self``).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import wds_cloud
from tests.support.typecheck import run_mypy

ROOT = Path(wds_cloud.__file__).resolve().parents[1]


def _type_checking_imports() -> tuple[dict[str, str], set[str]]:
    tree = ast.parse((ROOT / "wds_cloud" / "__init__.py").read_text())
    block = next(
        n
        for n in tree.body
        if isinstance(n, ast.If) and isinstance(n.test, ast.Name) and n.test.id == "TYPE_CHECKING"
    )
    imported: dict[str, str] = {}
    declared: set[str] = set()
    for node in block.body:
        if isinstance(node, ast.ImportFrom) and node.module != "types":
            for alias in node.names:
                assert alias.asname == alias.name, f"{alias.name} must be re-exported as itself"
                imported[alias.name] = str(node.module)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            declared.add(node.target.id)
    return imported, declared


def test_type_checking_block_mirrors_the_export_tables() -> None:
    imported, declared = _type_checking_imports()
    expected = dict(wds_cloud._EXPORTS)
    expected.update({name: "wds_cloud.pytorch" for name in wds_cloud._TORCH_AWARE})
    assert imported == expected
    assert declared == set(wds_cloud._WEBDATASET_MODULES)


SNIPPET = """
import wds_cloud as wds

ds = wds.WebDataset(["a.tar"], shardshuffle=False).shuffle(10).decode("rgb").to_tuple("jpg")
reveal_type(ds)
reveal_type(wds.DataPipeline(wds.SimpleShardList(["a.tar"])).batched(4))
reveal_type(wds.filters)
loader = wds.WebLoader(ds, num_workers=0, batch_size=None).unbatched()
reveal_type(loader)
"""


@pytest.mark.slow
def test_mypy_sees_real_types_and_rejects_a_misspelt_name(tmp_path: Path) -> None:
    result = run_mypy(tmp_path, SNIPPET + "wds.WebDatset(['a.tar'])\n")
    out = result.stdout
    assert 'Module has no attribute "WebDatset"' in out, out
    assert result.returncode == 1
    revealed = [line for line in out.splitlines() if "Revealed type" in line]
    assert len(revealed) == 4, out
    assert '"wds_cloud.pytorch.datasets.WebDataset"' in revealed[0]
    assert '"wds_cloud.pytorch.datasets.DataPipeline"' in revealed[1]
    assert '"types.ModuleType"' in revealed[2]
    assert '"wds_cloud.pytorch.loader.WebLoader"' in revealed[3]
    errors = [line for line in out.splitlines() if ": error:" in line]
    assert len(errors) == 1, out
