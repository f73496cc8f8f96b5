"""reshard_via_dsort: a seeded-shuffle reshard of ais:// shards as one dSort job (emulator)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.dsort.conftest import Record, make_shards, read_shards
from tests.emulators.ais.server import AisEmulator
from wds_cloud.aistore.dsort import (
    DsortJobError,
    can_reshard_via_dsort,
    reshard_via_dsort,
)
from wds_cloud.errors import ConfigError, ShardNotFoundError

pytestmark = pytest.mark.ais

FAST = {"progress": False, "poll_interval": 0.02, "timeout": 60}


def contents(records: list[Record]) -> dict[str, dict[str, bytes]]:
    return {r.key: r.members for r in records}


def test_template_source_is_shuffled_across_shards_and_packed_by_size(
    ais_emulator: AisEmulator, ais_client: Any
) -> None:
    records = make_shards(ais_emulator.store, "raw", shards=5, per_shard=8)
    summary = reshard_via_dsort(
        "ais://raw/samples-{00..04}.tar",
        "ais://out/",
        maxsize=700,
        seed=11,
        client=ais_client,
        **FAST,
    )
    written = read_shards(ais_emulator.store, "out")
    assert summary.job_id.startswith("srt-") and summary.seed == 11
    assert summary.shards == [f"ais://out/{name}" for name, _ in written]
    assert [n for n, _ in written] == [f"shard-{i:06d}.tar" for i in range(len(written))]
    assert summary.shards_written == len(written) > 3
    assert (summary.samples, summary.input_shards) == (40, 5)
    assert summary.bytes == sum(r.size for r in records)
    out = [r for _, recs in written for r in recs]
    # nothing lost, nothing duplicated, members intact
    assert sorted(r.key for r in out) == sorted(r.key for r in records)
    assert contents(out) == contents(records)
    # a global shuffle: the order changed and output shards mix samples of several inputs
    assert [r.key for r in out] != [r.key for r in records]
    origin = {r.key: i // 8 for i, r in enumerate(records)}
    assert any(len({origin[r.key] for r in recs}) > 1 for _, recs in written)
    # packed by size: every shard but the last reached 700 bytes with its last sample
    sizes = [[r.size for r in recs] for _, recs in written]
    assert all(sum(s) >= 700 > sum(s) - s[-1] for s in sizes[:-1])
    # the same seed writes the same bytes; another seed another order
    reshard_via_dsort(
        "ais://raw/samples-{00..04}.tar",
        "ais://again/",
        maxsize="700B",
        seed=11,
        client=ais_client,
        **FAST,
    )
    same = {o.name: o.data for o in ais_emulator.store.list_objects("again")}
    assert same == {o.name: o.data for o in ais_emulator.store.list_objects("out")}
    reshard_via_dsort(
        "ais://raw/samples-{00..04}.tar",
        "ais://other/",
        maxsize=700,
        seed=12,
        client=ais_client,
        **FAST,
    )
    other = [r.key for _, recs in read_shards(ais_emulator.store, "other") for r in recs]
    assert other != [r.key for r in out] and sorted(other) == sorted(r.key for r in out)


def test_prefix_and_url_list_sources_with_a_name_template(
    ais_emulator: AisEmulator, ais_client: Any
) -> None:
    records = make_shards(ais_emulator.store, "raw", template="train/part-{:02d}.tar")
    make_shards(ais_emulator.store, "raw", shards=2, template="val/part-{:02d}.tar")
    ais_emulator.store.put_object("raw", "train/README.json", b"{}")  # not a shard: left out
    summary = reshard_via_dsort(
        "ais://raw/train/",
        "ais://out/big-%04d.tar",
        maxsize="1KiB",
        seed=3,
        client=ais_client,
        **FAST,
    )
    written = read_shards(ais_emulator.store, "out")
    assert summary.shards == [f"ais://out/big-{i:04d}.tar" for i in range(len(written))]
    assert [f"ais://out/{n}" for n, _ in written] == summary.shards
    assert (summary.input_shards, summary.samples) == (4, 24)
    assert contents([r for _, recs in written for r in recs]) == contents(records)
    urls = [f"ais://raw/train/part-{i:02d}.tar" for i in (0, 2)]
    picked = reshard_via_dsort(
        urls, "ais://two/s/", maxsize=10_000, seed=3, client=ais_client, **FAST
    )
    assert picked.shards == ["ais://two/s/shard-000000.tar"]
    got = [r for _, recs in read_shards(ais_emulator.store, "two") for r in recs]
    assert contents(got) == contents(records[0:6] + records[12:18])


def test_a_missing_input_shard_fails_the_job(ais_emulator: AisEmulator, ais_client: Any) -> None:
    make_shards(ais_emulator.store, "raw", shards=3)
    with pytest.raises(DsortJobError, match=r"samples-03\.tar"):
        reshard_via_dsort(
            "ais://raw/samples-{00..03}.tar",
            "ais://out/",
            maxsize=500,
            seed=1,
            client=ais_client,
            **FAST,
        )


def test_refusals(ais_emulator: AisEmulator, ais_client: Any) -> None:
    make_shards(ais_emulator.store, "raw", shards=1)
    src = "ais://raw/samples-{00..00}.tar"
    with pytest.raises(ConfigError, match="maxcount"):
        reshard_via_dsort(src, "ais://out/", maxsize=500, maxcount=10, seed=1, client=ais_client)
    with pytest.raises(ConfigError, match="ais://"):
        reshard_via_dsort("s3://raw/x.tar", "ais://out/", maxsize=500, seed=1, client=ais_client)
    with pytest.raises(ConfigError, match="seed"):
        reshard_via_dsort(src, "ais://out/", maxsize=500, seed=-1, client=ais_client)
    with pytest.raises(ConfigError, match="prefix ending in '/'"):
        reshard_via_dsort(src, "ais://out/shuffled", maxsize=500, seed=1, client=ais_client)
    with pytest.raises(ShardNotFoundError, match="ais://raw/nothing/"):
        reshard_via_dsort(
            "ais://raw/nothing/", "ais://out/", maxsize=500, seed=1, client=ais_client
        )
    assert not ais_emulator.store.has_bucket("out")


def test_can_reshard_via_dsort() -> None:
    assert can_reshard_via_dsort("ais://a/s-{0..9}.tar", "ais://b/")
    assert can_reshard_via_dsort(["ais://a/x.tar", "ais://a/y.tar"], "ais://b/o-%06d.tar")
    assert not can_reshard_via_dsort("ais://a/", "ais://b/", maxcount=100)
    assert not can_reshard_via_dsort("s3://a/", "ais://b/")
    assert not can_reshard_via_dsort("ais://a/", "gs://b/")
    assert not can_reshard_via_dsort([], "ais://b/")
