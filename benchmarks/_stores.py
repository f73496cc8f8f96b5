"""Shards staged on local object stores for the benchmarks: SeaweedFS (S3) and
fake-gcs-server (GCS), both on 127.0.0.1, started and stopped by PID (``tests/servers``).

:class:`Stores` starts the servers; ``stage`` uploads local shards and says, per backend, the URLs wds_cloud reads
(``s3://``, ``gs://``), the URLs webdataset 1.0.2 reads (plain HTTP through its ``curl``
pipe: presigned GETs on S3, media downloads on GCS) and the environment a measuring
subprocess needs (endpoint and credentials).
"""

from __future__ import annotations

import contextlib
import os
import sys
import urllib.parse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

BUCKET = "bench"
KEY_ID = "benchkey"
SECRET = "benchsecret"
REGION = "us-east-1"


@dataclass(frozen=True)
class Staged:
    """Where one backend's copy of the shards is, and how to read it."""

    urls: list[str]  # for wds_cloud
    http_urls: list[str]  # for webdataset (local: the paths)
    env: dict[str, str]


class Stores:
    """The servers of ``backends`` (``local``, ``s3``, ``gcs``), started on entry, stopped by
    PID on exit; :meth:`stage` uploads shards to one of them."""

    def __init__(self, backends: list[str], tmp: Path) -> None:
        unknown = set(backends) - {"local", "s3", "gcs"}
        if unknown:
            raise ValueError(f"unknown backends {sorted(unknown)} (local, s3, gcs)")
        self.backends = backends
        self.tmp = tmp
        self._stack = contextlib.ExitStack()
        self._s3: Any = None
        self._gcs: Any = None

    def __enter__(self) -> Stores:
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        if root not in sys.path:
            sys.path.insert(0, root)  # tests.support: the servers
        from tests.support.fake_gcs import FakeGcsServer
        from tests.support.seaweed import SeaweedServer, boto3_client, create_bucket

        if "s3" in self.backends:
            weed = SeaweedServer(self.tmp / "weed", access_key=KEY_ID, secret_key=SECRET)
            server = self._stack.enter_context(weed)
            client = boto3_client(server.endpoint_url, access_key=KEY_ID, secret_key=SECRET)
            create_bucket(client, BUCKET)
            self._s3 = (server.endpoint_url, client)
        if "gcs" in self.backends:
            gcs = self._stack.enter_context(FakeGcsServer(self.tmp / "fake-gcs.log"))
            self._gcs = (gcs.endpoint, gcs.client().create_bucket(BUCKET))
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()

    def stage(self, backend: str, paths: list[str], prefix: str) -> Staged:
        """Upload ``paths`` under ``prefix/`` (``local``: nothing to do)."""
        if backend == "s3":
            return self._stage_s3(paths, prefix)
        if backend == "gcs":
            return self._stage_gcs(paths, prefix)
        return Staged(list(paths), list(paths), {})

    def _stage_s3(self, paths: list[str], prefix: str) -> Staged:
        endpoint, client = self._s3
        urls, http = [], []
        for path in paths:
            key = f"{prefix}/{os.path.basename(path)}"
            client.upload_file(path, BUCKET, key)
            urls.append(f"s3://{BUCKET}/{key}")
            params = {"Bucket": BUCKET, "Key": key}
            http.append(client.generate_presigned_url("get_object", Params=params, ExpiresIn=21600))
        env = {
            "AWS_ACCESS_KEY_ID": KEY_ID,
            "AWS_SECRET_ACCESS_KEY": SECRET,
            "AWS_DEFAULT_REGION": REGION,
            "AWS_REGION": REGION,
            "AWS_ENDPOINT_URL": endpoint,
        }
        return Staged(urls, http, env)

    def _stage_gcs(self, paths: list[str], prefix: str) -> Staged:
        endpoint, bucket = self._gcs
        urls, http = [], []
        for path in paths:
            name = f"{prefix}/{os.path.basename(path)}"
            bucket.blob(name).upload_from_filename(path)
            urls.append(f"gs://{BUCKET}/{name}")
            quoted = urllib.parse.quote(name, safe="")
            http.append(f"{endpoint}/download/storage/v1/b/{BUCKET}/o/{quoted}?alt=media")
        return Staged(urls, http, {"STORAGE_EMULATOR_HOST": endpoint})
