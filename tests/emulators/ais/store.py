"""The AIStore emulator's object store: buckets of in-memory objects, thread-safe.

This is the API other emulator modules (dSort: ``tests/emulators/ais/dsort.py``) and tests use
to read and write data directly, without going through HTTP::

    store = emulator.store
    store.create_bucket("src")                       # provider="ais" by default
    store.put_object("src", "shard-0.tar", data)     # -> StoredObject
    obj = store.get_object("src", "shard-0.tar")     # obj.data, obj.size, obj.checksum
    names = [o.name for o in store.list_objects("src", prefix="shard-")]   # sorted by name
    store.delete_object("src", "shard-0.tar")
    store.has_bucket("src"), store.has_object("src", "x"), store.list_buckets()

Buckets are keyed by ``(provider, name)``; remote providers (``aws``, ``gcp``, ``azure``,
``oci``) can be created here to stand in for AIS-fronted cloud buckets (the SDK itself cannot
create them). Missing buckets/objects raise :class:`NoSuchBucket` / :class:`NoSuchObject`
(both ``KeyError``); creating an existing bucket raises :class:`BucketExists`.

Multipart uploads are kept apart from objects: an upload's parts are invisible until
:meth:`AisStore.complete_upload` stores the concatenation under the object's name.
"""

from __future__ import annotations

import threading
import time
import uuid
from dataclasses import dataclass, field

import xxhash

PROVIDER_ALIASES = {"s3": "aws", "gs": "gcp", "az": "azure", "": "ais"}


def normalize_provider(provider: str | None) -> str:
    """Map SDK/CLI provider aliases (``s3``, ``gs``) to AIStore's names (``aws``, ``gcp``)."""
    p = (provider or "ais").lower()
    return PROVIDER_ALIASES.get(p, p)


def bucket_uri(provider: str, bucket: str, obj: str | None = None) -> str:
    """``ais://bck`` or ``ais://bck/obj``, as AIStore writes them in error messages."""
    base = f"{normalize_provider(provider)}://{bucket}"
    return base if obj is None else f"{base}/{obj}"


class NoSuchBucket(KeyError):
    """The bucket does not exist."""


class NoSuchObject(KeyError):
    """The object (or multipart upload) does not exist."""


class BucketExists(KeyError):
    """The bucket already exists."""


@dataclass(frozen=True)
class StoredObject:
    """One stored object.

    Attributes:
        name: object name inside its bucket.
        data: the object's bytes.
        version: increments each time the name is overwritten (starts at 1).
        atime_ns: last write time in nanoseconds since the epoch.
        checksum: XXH64 (seed 0) of ``data`` as lowercase hex (AIStore's ``xxhash2``).
    """

    name: str
    data: bytes
    version: int
    atime_ns: int
    checksum: str

    @property
    def size(self) -> int:
        """Length of the object in bytes."""
        return len(self.data)


@dataclass
class _Upload:
    provider: str
    bucket: str
    name: str
    parts: dict[int, bytes] = field(default_factory=dict)


class AisStore:
    """Thread-safe in-memory buckets and objects."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._buckets: dict[tuple[str, str], dict[str, StoredObject]] = {}
        self._uploads: dict[str, _Upload] = {}

    # buckets -------------------------------------------------------------------------------
    def create_bucket(self, name: str, provider: str = "ais", *, exist_ok: bool = False) -> None:
        """Create an empty bucket; raises :class:`BucketExists` unless ``exist_ok``."""
        key = (normalize_provider(provider), name)
        with self._lock:
            if key in self._buckets:
                if exist_ok:
                    return
                raise BucketExists(bucket_uri(*key))
            self._buckets[key] = {}

    def delete_bucket(self, name: str, provider: str = "ais") -> None:
        """Destroy a bucket and its objects; raises :class:`NoSuchBucket`."""
        key = (normalize_provider(provider), name)
        with self._lock:
            if key not in self._buckets:
                raise NoSuchBucket(bucket_uri(*key))
            del self._buckets[key]

    def has_bucket(self, name: str, provider: str = "ais") -> bool:
        """Whether the bucket exists."""
        return (normalize_provider(provider), name) in self._buckets

    def list_buckets(self, provider: str | None = None) -> list[tuple[str, str]]:
        """``(provider, name)`` of every bucket (of one provider when given), sorted."""
        want = normalize_provider(provider) if provider else None
        with self._lock:
            return sorted(k for k in self._buckets if want is None or k[0] == want)

    def _bucket(self, name: str, provider: str) -> dict[str, StoredObject]:
        key = (normalize_provider(provider), name)
        try:
            return self._buckets[key]
        except KeyError:
            raise NoSuchBucket(bucket_uri(*key)) from None

    # objects -------------------------------------------------------------------------------
    def put_object(
        self, bucket: str, name: str, data: bytes, provider: str = "ais"
    ) -> StoredObject:
        """Store ``data`` under ``name`` (overwriting); raises :class:`NoSuchBucket`."""
        data = bytes(data)
        with self._lock:
            objects = self._bucket(bucket, provider)
            old = objects.get(name)
            obj = StoredObject(
                name=name,
                data=data,
                version=1 if old is None else old.version + 1,
                atime_ns=time.time_ns(),
                checksum=xxhash.xxh64(data).hexdigest(),
            )
            objects[name] = obj
            return obj

    def get_object(self, bucket: str, name: str, provider: str = "ais") -> StoredObject:
        """The stored object; raises :class:`NoSuchBucket` or :class:`NoSuchObject`."""
        with self._lock:
            objects = self._bucket(bucket, provider)
            try:
                return objects[name]
            except KeyError:
                raise NoSuchObject(bucket_uri(provider, bucket, name)) from None

    def has_object(self, bucket: str, name: str, provider: str = "ais") -> bool:
        """Whether the object exists (False when the bucket does not)."""
        with self._lock:
            objects = self._buckets.get((normalize_provider(provider), bucket), {})
            return name in objects

    def delete_object(self, bucket: str, name: str, provider: str = "ais") -> None:
        """Delete one object; raises :class:`NoSuchBucket` or :class:`NoSuchObject`."""
        with self._lock:
            objects = self._bucket(bucket, provider)
            if objects.pop(name, None) is None:
                raise NoSuchObject(bucket_uri(provider, bucket, name))

    def list_objects(
        self, bucket: str, prefix: str = "", provider: str = "ais"
    ) -> list[StoredObject]:
        """Objects whose name starts with ``prefix``, sorted by name."""
        with self._lock:
            objects = self._bucket(bucket, provider)
            found = [o for n, o in objects.items() if n.startswith(prefix)]
        return sorted(found, key=lambda o: o.name)

    # multipart uploads -----------------------------------------------------------------------
    def create_upload(self, bucket: str, name: str, provider: str = "ais") -> str:
        """Start a multipart upload and return its id; raises :class:`NoSuchBucket`."""
        with self._lock:
            self._bucket(bucket, provider)
            upload_id = uuid.uuid4().hex
            self._uploads[upload_id] = _Upload(normalize_provider(provider), bucket, name)
            return upload_id

    def put_part(self, upload_id: str, number: int, data: bytes) -> None:
        """Store part ``number`` of an upload; raises :class:`NoSuchObject` for unknown ids."""
        with self._lock:
            upload = self._uploads.get(upload_id)
            if upload is None:
                raise NoSuchObject(f"upload {upload_id}")
            upload.parts[number] = bytes(data)

    def complete_upload(self, upload_id: str, numbers: list[int]) -> StoredObject:
        """Concatenate the listed parts (in the given order) into the object."""
        with self._lock:
            upload = self._uploads.get(upload_id)
            if upload is None:
                raise NoSuchObject(f"upload {upload_id}")
            missing = [n for n in numbers if n not in upload.parts]
            if missing:
                raise NoSuchObject(f"upload {upload_id}: parts {missing} were never uploaded")
            del self._uploads[upload_id]
            data = b"".join(upload.parts[n] for n in numbers)
        return self.put_object(upload.bucket, upload.name, data, upload.provider)

    def abort_upload(self, upload_id: str) -> None:
        """Discard an upload and its parts; raises :class:`NoSuchObject` for unknown ids."""
        with self._lock:
            if self._uploads.pop(upload_id, None) is None:
                raise NoSuchObject(f"upload {upload_id}")

    def pending_uploads(self) -> list[tuple[str, str, str]]:
        """``(provider, bucket, name)`` of every upload neither completed nor aborted."""
        with self._lock:
            return sorted((u.provider, u.bucket, u.name) for u in self._uploads.values())
