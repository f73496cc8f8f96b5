"""The dataset jobs with ``ais://`` input and output, on the emulator and the real cluster:
``convert`` (files under a prefix), ``map``, ``reshard`` (on the engine: dSort is
``tests/dsort``'s), ``index`` and ``verify``."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest

from tests.ais.backends import AisBackend
from tests.jobs import helpers
from tests.jobs.helpers import multiset, read_samples, write_inputs
from wds_cloud.jobs import convert, index_job, map_shards, reshard, verify_job
from wds_cloud.listing import resolve_shards

pytestmark = [pytest.mark.ais, pytest.mark.slow]


def _upload_inputs(backend: AisBackend, bucket: str, tmp_path: Path, shards: int) -> list[str]:
    """Local input shards (9 samples each) stored under ``in/``; returns their local paths."""
    local = resolve_shards(write_inputs(tmp_path / "in", shards, 9))
    for path in local:
        backend.put_object(bucket, f"in/{path.rsplit('/', 1)[1]}", Path(path).read_bytes())
    return local


def test_map_and_reshard_on_ais(ais_backend: AisBackend, tmp_path: Path) -> None:
    registry = ais_backend.registry()
    jobs = ais_backend.create_bucket("jobs")
    local = _upload_inputs(ais_backend, jobs, tmp_path, 2)
    mapped = map_shards(
        f"ais://{jobs}/in/", f"ais://{jobs}/mapped/m-%02d.tar", helpers.broken, registry=registry
    )
    kept = [helpers.upper(s) for s in read_samples(local) if s["cls"] not in (b"3", b"5")]
    assert read_samples(mapped.shards, registry) == kept
    # a select keeps the shuffle on the engine (without map/select, ais:// to ais:// may go to
    # dSort: tests/jobs/test_bounds.py checks that hook)
    result = reshard(
        f"ais://{jobs}/mapped/",
        f"ais://{jobs}/shuf/s-%02d.tar",
        maxcount=4,
        shuffle=True,
        seed=1,
        select=helpers.even_class,
        registry=registry,
    )
    even = [s for s in kept if int(s["cls"]) % 2 == 0]
    assert multiset(read_samples(result.shards, registry)) == multiset(even)
    assert len(result.shards) == -(-len(kept) // 4) - sum(
        1 for t in result.tasks if t.output is None
    )
    assert ais_backend.pending_uploads(jobs) == []


def test_convert_files_under_an_ais_prefix(ais_backend: AisBackend) -> None:
    registry = ais_backend.registry()
    bucket = ais_backend.create_bucket("conv")
    for i in range(7):
        ais_backend.put_object(bucket, f"raw/a/{i:02d}.jpg", bytes([i]) * 9)
        ais_backend.put_object(bucket, f"raw/a/{i:02d}.json", b"{}")
    out = f"ais://{bucket}/shards/s-%02d.tar"
    summary = convert(f"ais://{bucket}/raw/", out, maxcount=3, registry=registry)
    got = read_samples(summary.shards, registry)
    assert [s["__key__"] for s in got] == [f"a/{i:02d}" for i in range(7)]
    assert got[6] == {"__key__": "a/06", "jpg": b"\6" * 9, "json": b"{}"}
    assert summary.shards == [out % i for i in range(3)]


def test_index_and_verify_jobs_on_ais(ais_backend: AisBackend, tmp_path: Path) -> None:
    registry = ais_backend.registry()
    bucket = ais_backend.create_bucket("idx")
    _upload_inputs(ais_backend, bucket, tmp_path, 3)
    urls = [f"ais://{bucket}/in/in-{i:03d}.tar" for i in range(3)]
    summary = index_job(urls, json=f"ais://{bucket}/in/ds.json", registry=registry)
    assert summary.extra["failed"] == [] and summary.samples_in == 27
    assert summary.extra["json"] == f"ais://{bucket}/in/ds.json"
    for i in range(3):
        assert ais_backend.has_object(bucket, f"in/in-{i:03d}.idx")
    assert verify_job(urls, registry=registry).extra["corrupt"] == []

    blob = bytearray(ais_backend.get_object(bucket, "in/in-002.tar") or b"")
    with tarfile.open(fileobj=io.BytesIO(bytes(blob))) as tar:
        second = tar.getmembers()[1].offset
    blob[second + 148 : second + 156] = b"0000000\0"  # break the checksum of a later header
    ais_backend.put_object(bucket, "in/in-002.tar", bytes(blob))
    (bad,) = verify_job(urls, registry=registry).extra["corrupt"]
    assert bad["url"] == urls[2] and bad["offset"] == second
