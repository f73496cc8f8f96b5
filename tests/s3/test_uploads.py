"""Incomplete multipart uploads: left by a SIGKILLed ShardWriter, listed and aborted, through
the library and the real ``wds-cloud uploads`` command."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
from typing import Any

import pytest

from tests.s3.conftest import ACCESS_KEY, REGION, SECRET_KEY, make_config
from wds_cloud.errors import ConfigError
from wds_cloud.openers.s3.opener import S3Opener
from wds_cloud.openers.s3.uploads import (
    abort_upload,
    list_incomplete_uploads,
    parse_duration,
)

pytestmark = pytest.mark.s3

WRITER = """
import os, sys, time
from wds_cloud.writing.shardwriter import ShardWriter
with ShardWriter(sys.argv[1], maxcount=10**6, maxsize=1e12) as sink:
    for i in range(12):
        sink.write({"__key__": "s%04d" % i, "bin": os.urandom(1 << 20)})
    print("WRITTEN", flush=True)
    time.sleep(600)
"""


def _env(endpoint: str) -> dict[str, str]:
    return {
        **os.environ,
        "AWS_ACCESS_KEY_ID": ACCESS_KEY,
        "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
        "AWS_REGION": REGION,
        "WDS_CLOUD_S3_ENDPOINT_URL": endpoint,
        "WDS_CLOUD_S3_MULTIPART_CHUNKSIZE": str(5 << 20),
    }


def _cli(endpoint: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "wds_cloud.cli", *args],
        capture_output=True,
        text=True,
        env=_env(endpoint),
        timeout=300,
        check=False,
    )


def _open_uploads(raw_client: Any, bucket: str) -> list[str]:
    return [u["Key"] for u in raw_client.list_multipart_uploads(Bucket=bucket).get("Uploads", ())]


@pytest.mark.slow
def test_killed_shard_writer_upload_is_listed_and_aborted(
    s3_endpoint: str, raw_client: Any, bucket: str
) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, f"s3://{bucket}/out/shard-%04d.tar"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(s3_endpoint),
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line == "WRITTEN\n", proc.stderr.read() if proc.stderr else ""
    finally:
        proc.kill()  # SIGKILL: no close(), no abort()
        proc.communicate(timeout=60)
    assert _open_uploads(raw_client, bucket) == ["out/shard-0000.tar"]
    assert "Contents" not in raw_client.list_objects_v2(Bucket=bucket)  # nothing partial

    listed = _cli(s3_endpoint, "uploads", "list", f"s3://{bucket}/out/")
    assert listed.returncode == 0, listed.stderr
    assert f"s3://{bucket}/out/shard-0000.tar" in listed.stdout
    assert "1 incomplete upload(s)" in listed.stderr
    assert _cli(s3_endpoint, "uploads", "list", f"s3://{bucket}/other/").stdout == ""

    dry = _cli(s3_endpoint, "uploads", "abort", f"s3://{bucket}/out/", "--json")
    report = json.loads(dry.stdout)
    assert report["dry_run"] and len(report["found"]) == 1 and report["aborted"] == []
    assert _open_uploads(raw_client, bucket) == ["out/shard-0000.tar"]

    young = _cli(s3_endpoint, "uploads", "abort", f"s3://{bucket}/", "--older-than", "1h", "--yes")
    assert young.returncode == 0 and "aborted 0 of 0" in young.stderr
    done = _cli(s3_endpoint, "uploads", "abort", f"s3://{bucket}/out/", "--yes")
    assert done.returncode == 0, done.stderr
    assert "aborted  " in done.stdout and "aborted 1 of 1" in done.stderr
    assert _open_uploads(raw_client, bucket) == []
    assert "Contents" not in raw_client.list_objects_v2(Bucket=bucket)
    again = _cli(s3_endpoint, "uploads", "list", f"s3://{bucket}/", "--json")
    assert json.loads(again.stdout) == {"uploads": []}


def test_listing_pages_prefix_and_age(s3_endpoint: str, raw_client: Any, bucket: str) -> None:
    ids = {}
    for key in ("a/1.tar", "a/2.tar", "a/3.tar", "a/sub/4.tar", "a/5.tar", "b/6.tar"):
        ids[key] = raw_client.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]
    opener = S3Opener(make_config(s3_endpoint, list_page_size=2))
    found = list_incomplete_uploads(f"s3://{bucket}/a/", opener=opener)
    assert [u.url for u in found] == [
        f"s3://{bucket}/a/{k}" for k in ("1.tar", "2.tar", "3.tar", "5.tar", "sub/4.tar")
    ]
    assert all(u.upload_id == ids[u.key] for u in found)
    started = min(u.initiated for u in found if u.initiated is not None)
    later = started + dt.timedelta(hours=2)
    assert (
        len(list_incomplete_uploads(f"s3://{bucket}/a/", opener=opener, older_than=3600, now=later))
        == 5
    )
    assert (
        list_incomplete_uploads(f"s3://{bucket}/a/", opener=opener, older_than=86400, now=later)
        == []
    )

    assert abort_upload(found[0], opener=opener) is True
    abort_upload(found[0], opener=opener)  # already gone: no error (AWS says NoSuchUpload)
    left = list_incomplete_uploads(f"s3://{bucket}", opener=opener)
    assert sorted(u.key for u in left) == [
        "a/2.tar",
        "a/3.tar",
        "a/5.tar",
        "a/sub/4.tar",
        "b/6.tar",
    ]


def test_missing_bucket_and_other_schemes(s3_endpoint: str) -> None:
    out = _cli(s3_endpoint, "uploads", "list", "s3://no-such-bucket-xyz/p/")
    assert out.returncode == 1 and "Traceback" not in out.stderr
    assert "no-such-bucket-xyz" in out.stderr and len(out.stderr.strip().splitlines()) == 1
    for url, why in (("gs://b/p/", "cannot be listed"), ("ais://b/p/", "aistore SDK")):
        out = _cli(s3_endpoint, "uploads", "abort", url)
        assert out.returncode == 1 and why in out.stderr and "Traceback" not in out.stderr


def test_parse_duration() -> None:
    assert parse_duration("90") == 90 and parse_duration("90s") == 90
    assert parse_duration("30m") == 1800 and parse_duration("1.5h") == 5400
    assert parse_duration("7d") == 7 * 86400 and parse_duration("2W") == 14 * 86400
    for bad in ("", "x", "-1d", "nan", "3y"):
        with pytest.raises(ConfigError, match="bad duration"):
            parse_duration(bad)
