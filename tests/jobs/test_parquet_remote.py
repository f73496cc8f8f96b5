"""Parquet input on every backend: generated Parquet files (several row groups, binary, string,
int, float, bool and list columns, nulls) converted from s3:// (SeaweedFS), gs://
(fake-gcs-server), ais:// (the AIStore emulator) and http:// (a real HTTP server) give the same
shards, byte for byte, as the same files converted from local disk, and the samples a plain
reading of the tables gives; a missing object and bytes that are not Parquet are errors naming
the URL."""

from __future__ import annotations

import json
import os
import random
import re
from pathlib import Path
from typing import Any

import pytest

from tests.jobs.helpers import digests, read_samples
from tests.s3.conftest import make_config
from tests.support.http_server import HttpFileServer
from wds_cloud.errors import ConfigError, ShardNotFoundError, ShardReadError
from wds_cloud.jobs import convert
from wds_cloud.openers.registry import OpenerRegistry
from wds_cloud.openers.s3.opener import S3Opener

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

_NAMES = ("jpg", "txt", "cls", "score", "flag", "tags", "json", "caption")


def _column(rng: random.Random, kind: str, rows: int, nulls: float) -> Any:
    def value(i: int) -> Any:
        if rng.random() < nulls:
            return None
        if kind == "binary":
            return rng.randbytes(rng.choice((0, 1, 5, 100, 3000)))
        if kind == "string":
            return "".join(rng.choice("abcé✓ \n") for _ in range(rng.randint(0, 30)))
        if kind == "int":
            return rng.randint(-(2**40), 2**40)
        if kind == "float":
            return rng.choice((0.5, -1.25, 1e300, rng.random()))
        if kind == "bool":
            return rng.random() < 0.5
        return [rng.randint(0, 9) for _ in range(rng.randint(0, 4))]

    types = {
        "binary": pa.binary(),
        "string": pa.string(),
        "int": pa.int64(),
        "float": pa.float64(),
        "bool": pa.bool_(),
        "list": pa.list_(pa.int32()),
    }
    return pa.array([value(i) for i in range(rows)], type=types[kind])


def random_table(rng: random.Random, rows: int | None = None) -> Any:
    """A table of 1-6 columns of random kinds (some rows null) and ``rows`` rows."""
    rows = rng.choice((0, 1, 17, 60, 151)) if rows is None else rows
    names = rng.sample(_NAMES, rng.randint(1, 6))
    kinds = ("binary", "string", "int", "float", "bool", "list")
    return pa.table({n: _column(rng, rng.choice(kinds), rows, rng.choice((0, 0.2))) for n in names})


def write_dataset(root: Path, seed: int, files: int = 5) -> dict[str, Any]:
    """``files`` Parquet files of random tables (several row groups each), one of them with a
    few MB of binary column (reads larger than the read cache's blocks); name -> table."""
    rng = random.Random(seed)
    root.mkdir(parents=True, exist_ok=True)
    out = {}
    for i in range(files):
        table = random_table(rng)
        if i == 1:
            big = pa.array([rng.randbytes(60_000) for _ in range(80)], type=pa.binary())
            table = pa.table({"jpg": big, "cls": pa.array(list(range(80)), type=pa.int64())})
        name = f"part-{i:03d}.parquet"
        pq.write_table(table, root / name, row_group_size=rng.randint(3, 40))
        out[name] = table
    return out


def expected_samples(tables: dict[str, Any]) -> list[dict[str, Any]]:
    """The samples a plain reading of the tables gives (the reference)."""
    out = []
    for name in sorted(tables):
        stem = name.rsplit(".", 1)[0]
        for row, record in enumerate(tables[name].to_pylist()):
            sample: dict[str, Any] = {"__key__": f"{stem}/{row:09d}"}
            for col, value in record.items():
                if value is None:
                    continue
                if isinstance(value, bytes):
                    sample[col] = value
                elif isinstance(value, str):
                    sample[col] = value.encode()
                else:
                    sample[col] = json.dumps(value, sort_keys=True).encode()
            out.append(sample)
    return out


def _check_same_as_local(
    source: Any, local: str, registry: OpenerRegistry, tmp_path: Path, tables: dict[str, Any]
) -> None:
    maxcount = 23
    remote = convert(source, str(tmp_path / "r" / "o-%04d.tar"), maxcount=maxcount,
                     registry=registry, manifest=False)  # fmt: skip
    plain = convert(local, str(tmp_path / "l" / "o-%04d.tar"), maxcount=maxcount, manifest=False)
    assert remote.extra.get("kind", "parquet") == "parquet"
    shards = sum(-(-t.num_rows // maxcount) for t in tables.values())
    assert len(remote.shards) == len(plain.shards) == shards
    if shards:  # a file of no rows writes nothing
        assert digests(tmp_path / "r") == digests(tmp_path / "l")
    assert read_samples(remote.shards) == expected_samples(tables)
    assert remote.samples_out == plain.samples_out == sum(t.num_rows for t in tables.values())


@pytest.mark.s3
def test_s3_prefix_converts_as_local_disk(s3_endpoint, raw_client, bucket, tmp_path):
    tables = write_dataset(tmp_path / "pq", seed=1)
    for name in tables:
        raw_client.put_object(
            Bucket=bucket, Key=f"pq/{name}", Body=(tmp_path / "pq" / name).read_bytes()
        )
    raw_client.put_object(Bucket=bucket, Key="pq/_SUCCESS", Body=b"")  # a Spark marker
    registry = OpenerRegistry()
    registry.register("s3", S3Opener(make_config(s3_endpoint)), override=True)
    _check_same_as_local(f"s3://{bucket}/pq/", str(tmp_path / "pq"), registry, tmp_path, tables)
    with pytest.raises(ShardNotFoundError, match=re.escape(f"s3://{bucket}/pq/nope.parquet")):
        convert(f"s3://{bucket}/pq/nope.parquet", str(tmp_path / "x-%d.tar"), registry=registry)


@pytest.mark.gcs
def test_gs_glob_converts_as_local_disk(fake_gcs: Any, tmp_path):
    from wds_cloud.openers.gcs.opener import GcsOpener

    tables = write_dataset(tmp_path / "pq", seed=2)
    bucket = fake_gcs.client().create_bucket("parquet-in")
    for name in tables:
        bucket.blob(f"t/{name}").upload_from_string((tmp_path / "pq" / name).read_bytes())
    bucket.blob("t/notes.txt").upload_from_string(b"not part of the glob")
    registry = OpenerRegistry()
    registry.register("gs", GcsOpener(endpoint=fake_gcs.endpoint, backoff=0.01), override=True)
    _check_same_as_local(
        "gs://parquet-in/t/*.parquet", str(tmp_path / "pq"), registry, tmp_path, tables
    )


@pytest.mark.ais
def test_ais_prefix_converts_as_local_disk(ais_emulator: Any, tmp_path):
    from wds_cloud.openers.ais.opener import AisOpener

    tables = write_dataset(tmp_path / "pq", seed=3)
    ais_emulator.store.create_bucket("pq", exist_ok=True)
    for name in tables:
        ais_emulator.store.put_object("pq", f"d/{name}", (tmp_path / "pq" / name).read_bytes())
    ais_emulator.store.put_object("pq", "d/bad.parquet", b"PAR1 but not really Parquet" * 10)
    registry = OpenerRegistry()
    registry.register(
        "ais", AisOpener(endpoint=ais_emulator.url, retries=2, backoff=0.0), override=True
    )
    with pytest.raises(
        ShardReadError, match=re.escape("ais://pq/d/bad.parquet is not a readable Parquet")
    ):
        convert("ais://pq/d/", str(tmp_path / "x-%d.tar"), registry=registry)
    ais_emulator.store.delete_object("pq", "d/bad.parquet")
    _check_same_as_local("ais://pq/d/", str(tmp_path / "pq"), registry, tmp_path, tables)


def test_http_objects_convert_as_local_disk(tmp_path):
    tables = write_dataset(tmp_path / "www", seed=4, files=3)
    registry = OpenerRegistry()
    with HttpFileServer(tmp_path / "www") as server:
        urls = [server.url(name) for name in sorted(tables)]  # http cannot list: a list
        _check_same_as_local(urls, str(tmp_path / "www"), registry, tmp_path / "all", tables)
        with pytest.raises(ConfigError, match="cannot list"):
            convert(server.url(""), str(tmp_path / "y-%d.tar"), registry=registry)
        (tmp_path / "www" / "short.parquet").write_bytes(b"PAR1")
        for name in tables:
            out = tmp_path / name
            _check_same_as_local(
                server.url(name), str(tmp_path / "www" / name), registry, out, {name: tables[name]}
            )
        with pytest.raises(
            ShardReadError, match=re.escape("short.parquet is not a readable Parquet")
        ):
            convert(server.url("short.parquet"), str(tmp_path / "y-%d.tar"), registry=registry)
        with pytest.raises(ShardNotFoundError, match=re.escape("gone.parquet")):
            convert(server.url("gone.parquet"), str(tmp_path / "y-%d.tar"), registry=registry)


def test_many_generated_tables_read_the_same_over_http_as_from_disk(tmp_path):
    """Row ranges of 60 random tables read through ranged HTTP reads and from disk agree, and
    agree with the tables."""
    from wds_cloud.jobs.parquet import read_rows
    from wds_cloud.jobs.sources import ParquetSource

    rng = random.Random(5)
    root = tmp_path / "www"
    root.mkdir()
    tables = {}
    for i in range(60):
        name = f"t{i:02d}.parquet"
        tables[name] = random_table(rng, rows=rng.randint(1, 90))
        pq.write_table(tables[name], root / name, row_group_size=rng.randint(1, 30))
    with HttpFileServer(root) as server:
        for name, table in tables.items():
            rows = table.num_rows
            start = rng.randint(0, rows - 1)
            stop = rng.randint(start + 1, rows)
            cols = tuple(rng.sample(table.column_names, rng.randint(1, table.num_columns)))
            columns = None if rng.random() < 0.5 else cols
            remote = list(read_rows(ParquetSource(server.url(name), start, stop, None, columns)))
            local = list(read_rows(ParquetSource(str(root / name), start, stop, None, columns)))
            want = expected_samples({name: table})[start:stop]
            if columns is not None:
                want = [
                    {k: v for k, v in s.items() if k == "__key__" or k in columns} for s in want
                ]
            assert [s for s, _ in remote] == [s for s, _ in local] == want, name
    assert os.listdir(root)


def test_cli_converts_a_parquet_url_and_refuses_maxsize_for_it(tmp_path):
    import subprocess
    import sys

    tables = write_dataset(tmp_path / "www", seed=8, files=2)
    with HttpFileServer(tmp_path / "www") as server:
        url = server.url("part-001.parquet")

        def cli(*args: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                [sys.executable, "-m", "wds_cloud.cli", "job", "convert", url, *args],
                capture_output=True, text=True, timeout=120, check=False,
            )  # fmt: skip

        done = cli("-o", str(tmp_path / "out"), "--maxcount", "30", "--json")
        refused = cli("-o", str(tmp_path / "no"), "--maxsize", "1e6")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["samples_out"] == 80
    got = read_samples(sorted(str(p) for p in (tmp_path / "out").glob("*.tar")))
    assert got == expected_samples({"part-001.parquet": tables["part-001.parquet"]})
    assert refused.returncode == 1 and "maxsize is not supported for Parquet" in refused.stderr


def test_remote_reads_follow_row_groups_not_the_file(tmp_path):
    """A 12 MB file of 1.5 MB row groups: no read is much larger than a row group, the tasks
    together read the file about once, and its size is asked once (by the plan)."""
    from wds_cloud.openers.http.opener import HttpOpener

    class Noting(HttpOpener):
        reads: list[int] = []
        sizes: list[str] = []

        def read_range(self, url: str, offset: int, length: int, **options: Any) -> bytes:
            self.reads.append(length)
            return super().read_range(url, offset, length, **options)

        def open_at(self, url: str, offset: int, **options: Any) -> Any:
            self.sizes.append(url)
            return super().open_at(url, offset, **options)

    rng = random.Random(9)
    root = tmp_path / "www"
    root.mkdir()
    blobs = pa.array([rng.randbytes(6000) for _ in range(2000)], type=pa.binary())
    pq.write_table(pa.table({"bin": blobs}), root / "big.parquet", row_group_size=250)
    file_size = (root / "big.parquet").stat().st_size
    registry = OpenerRegistry()
    opener = Noting()
    registry.register("http", opener, override=True)
    with HttpFileServer(root) as server:
        summary = convert(server.url("big.parquet"), str(tmp_path / "o-%02d.tar"),
                          maxcount=250, registry=registry, manifest=False)  # fmt: skip
    assert len(summary.shards) == 8 and summary.samples_out == 2000
    assert file_size > 12e6 and max(opener.reads) < 2 * 250 * 6000
    assert file_size < sum(opener.reads) < 1.1 * file_size
    assert len(opener.sizes) == 1
