"""Every spec in dsort_specs/ validates, JSON and YAML twins agree, and each runs on the emulator."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.dsort.conftest import make_shards, read_shards
from tests.emulators.ais.server import AisEmulator
from wds_cloud.aistore import dsort

SPEC_DIR = Path(__file__).resolve().parents[2] / "dsort_specs"
SPEC_FILES = sorted(p for p in SPEC_DIR.iterdir() if p.suffix in (".json", ".yaml", ".yml"))


def test_there_are_checked_specs() -> None:
    names = {p.name for p in SPEC_FILES}
    assert {"shuffle.json", "shuffle.yaml", "alphanumeric.json", "content-cls.yaml"} <= names


@pytest.mark.parametrize("path", SPEC_FILES, ids=lambda p: p.name)
def test_spec_file_validates(path: Path) -> None:
    spec = dsort.load_spec(path)
    twin = path.with_suffix(".yaml" if path.suffix == ".json" else ".json")
    assert dsort.load_spec(twin) == spec
    assert dsort.parse_size(spec["output_shard_size"]) == 100 << 20


@pytest.mark.ais
@pytest.mark.parametrize("path", SPEC_FILES, ids=lambda p: p.name)
def test_spec_file_runs_on_the_emulator(
    path: Path, ais_emulator: AisEmulator, ais_client: Any
) -> None:
    spec = dsort.load_spec(path)
    src, dst = spec["input_bck"]["name"], spec["output_bck"]["name"]
    records = make_shards(ais_emulator.store, src, shards=19, per_shard=3)
    result = dsort.wait(
        dsort.start(path, client=ais_client),
        client=ais_client,
        progress=False,
        poll_interval=0.02,
        timeout=60,
    )
    assert result.success and result.input_shards == 19 and result.members == 3 * 57
    shards = read_shards(ais_emulator.store, dst)
    assert len(shards) == result.shards_created == 1  # 57 small samples < 100 MiB
    out = shards[0][1]
    assert sorted(r.key for r in out) == sorted(r.key for r in records)
    assert {r.key: r.members for r in out} == {r.key: r.members for r in records}
    kind = spec["algorithm"]["kind"]
    if kind == "alphanumeric":
        assert [r.key for r in out] == sorted(r.key for r in records)
    elif kind == "content":
        labels = [int(r.members[".cls"]) for r in out]
        assert labels == sorted(labels)
