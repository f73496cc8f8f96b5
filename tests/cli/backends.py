"""One object store per backend, with the environment a ``wds-cloud`` subprocess needs to reach it.

The ``backend`` fixture (in ``conftest.py``) is parametrized over ``local``, ``s3`` (SeaweedFS),
``gs`` (fake-gcs-server), ``az`` (Azurite) and ``ais`` (the AIStore emulator driven by the real SDK). Each gives
a fresh, empty bucket (or folder): :attr:`Backend.root` is its URL, :meth:`Backend.put` writes an
object, :meth:`Backend.names` lists what is there through the backend's own client (not
through wds_cloud), and :attr:`Backend.env` configures the command line for it.
"""

from __future__ import annotations

import itertools
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_ids = itertools.count()

# variables of the developer's shell that would point a subprocess somewhere else
_CLEARED = ("AWS_", "AIS_", "AZURE_", "STORAGE_EMULATOR_HOST", "GOOGLE_", "WDS_CLOUD_")


def clean_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """``os.environ`` without cloud settings, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(_CLEARED)}
    env.update(extra or {})
    return env


@dataclass
class Backend:
    """A fresh bucket (or folder) on one backend."""

    name: str
    root: str
    missing_bucket: str
    env: dict[str, str]
    put: Callable[[str, bytes], None]
    names: Callable[[], list[str]]
    extra: dict[str, Any] = field(default_factory=dict)

    def url(self, name: str) -> str:
        """The URL of object ``name``."""
        return f"{self.root}/{name}"


def local_backend(tmp_path: Path) -> Backend:
    root = tmp_path / f"store-{next(_ids)}"
    root.mkdir()

    def put(name: str, data: bytes) -> None:
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)

    def names() -> list[str]:
        return sorted(
            str(p.relative_to(root)).replace(os.sep, "/") for p in root.rglob("*") if p.is_file()
        )

    return Backend("local", str(root), str(tmp_path / "no-such-folder"), clean_env(), put, names)


def s3_backend(seaweed: Any) -> Backend:
    from tests.support.seaweed import ACCESS_KEY, REGION, SECRET_KEY, boto3_client, create_bucket

    client = boto3_client(seaweed.endpoint_url)
    bucket = f"cli-{next(_ids):04d}-{int(time.time() * 1000) % 100000}"
    create_bucket(client, bucket)

    def names() -> list[str]:
        pages = client.get_paginator("list_objects_v2").paginate(Bucket=bucket)
        return sorted(o["Key"] for page in pages for o in page.get("Contents", ()))

    env = clean_env(
        {
            "AWS_ENDPOINT_URL": seaweed.endpoint_url,
            "AWS_ACCESS_KEY_ID": ACCESS_KEY,
            "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
            "AWS_REGION": REGION,
        }
    )
    return Backend(
        "s3",
        f"s3://{bucket}",
        "s3://no-such-bucket-cli",
        env,
        lambda name, data: client.put_object(Bucket=bucket, Key=name, Body=data),
        names,
    )


def gcs_backend(fake_gcs: Any) -> Backend:
    client = fake_gcs.client()
    bucket = client.create_bucket(f"cli-bucket-{next(_ids)}-{int(time.time() * 1000) % 100000}")

    def names() -> list[str]:
        return sorted(b.name for b in client.list_blobs(bucket.name))

    env = clean_env({"STORAGE_EMULATOR_HOST": fake_gcs.endpoint, "GOOGLE_CLOUD_PROJECT": "test"})
    return Backend(
        "gs",
        f"gs://{bucket.name}",
        "gs://no-such-bucket-cli",
        env,
        lambda name, data: bucket.blob(name).upload_from_string(data),
        names,
    )


def azure_backend(azurite: Any) -> Backend:
    container = azurite.container(f"cli-{next(_ids)}-{int(time.time() * 1000) % 100000}")

    def names() -> list[str]:
        return sorted(b.name for b in container.list_blobs())

    return Backend(
        "az",
        f"az://{container.container_name}",
        "az://no-such-container-cli",
        clean_env(azurite.environ()),
        lambda name, data: container.upload_blob(name, data, overwrite=True) and None,
        names,
    )


def ais_backend(emulator: Any) -> Backend:
    store = emulator.store
    bucket = f"cli-{next(_ids)}"
    store.create_bucket(bucket)

    def names() -> list[str]:
        return sorted(o.name for o in store.list_objects(bucket))

    return Backend(
        "ais",
        f"ais://{bucket}",
        "ais://no-such-bucket-cli",
        clean_env({"AIS_ENDPOINT": emulator.url}),
        lambda name, data: store.put_object(bucket, name, data),
        names,
        {"emulator": emulator},
    )
