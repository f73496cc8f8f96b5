"""The two AIStores the ``ais://`` tests run on: the emulator and a real AIStore 5.0 cluster.

An :class:`AisBackend` stores and inspects objects the way the test needs (the emulator through
its store, the real cluster through the ``aistore`` SDK and the targets' mountpaths), and makes
openers and registries for its endpoint. Tests use it through the ``ais_backend`` fixture
(``tests/ais/conftest.py``), parametrised over ``emulator`` and ``real``.

Bucket names: the emulator is emptied for every test, so a name is used as given; the real
cluster lives for the whole session, so :meth:`AisBackend.bucket_name` adds a suffix unique to
the backend (one per test) and :meth:`AisBackend.cleanup` destroys every bucket it named.
Always build URLs from the name :meth:`AisBackend.create_bucket` returns.
"""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlsplit

import requests

from wds_cloud.openers.ais.opener import AisOpener
from wds_cloud.openers.registry import OpenerRegistry

if TYPE_CHECKING:
    from tests.emulators.ais.server import AisEmulator
    from tests.servers.aistore import Cluster

#: the settings of the tests' openers unless a test says otherwise: 2 retries without backoff
OPENER_DEFAULTS: dict[str, Any] = {"retries": 2, "backoff": 0.0, "timeout": (2.0, 20.0)}


class AisBackend:
    """What an ``ais://`` test needs from the AIStore it runs on (see the module docstring).

    Attributes:
        kind: ``"emulator"`` or ``"real"``.
        url: the endpoint (the emulator, or the real cluster's proxy).
    """

    kind = ""

    def __init__(self, url: str) -> None:
        self.url = url

    @property
    def emulator(self) -> AisEmulator | None:
        """The emulator (for its hooks and request log), or None on the real cluster."""
        return None

    # -- buckets and objects (overridden) -----------------------------------------------------

    def bucket_name(self, name: str) -> str:
        """The name ``name`` stands for on this backend (unique per test on the real one)."""
        return name

    def create_bucket(self, name: str) -> str:
        """Create the bucket ``name`` stands for (if missing); returns its actual name."""
        raise NotImplementedError

    def put_object(self, bucket: str, name: str, data: bytes) -> None:
        """Store ``data`` as ``name`` in ``bucket`` (an actual name)."""
        raise NotImplementedError

    def get_object(self, bucket: str, name: str) -> bytes | None:
        """The stored bytes of ``name``, or None when there is no such object."""
        raise NotImplementedError

    def pending_uploads(self, bucket: str) -> list[str]:
        """Names of objects in ``bucket`` with a multipart upload neither completed nor aborted."""
        raise NotImplementedError

    def port_for(self, bucket: str, name: str) -> int:
        """The port that serves the bytes of a GET of ``name``: put a fault proxy there."""
        raise NotImplementedError

    def cleanup(self) -> None:
        """Remove what this backend created (the emulator is reset by its fixture instead)."""

    # -- derived ------------------------------------------------------------------------------

    def has_object(self, bucket: str, name: str) -> bool:
        """Whether ``name`` is stored (visible) in ``bucket``."""
        return self.get_object(bucket, name) is not None

    def opener(self, **overrides: Any) -> AisOpener:
        """An :class:`AisOpener` for :attr:`url`: :data:`OPENER_DEFAULTS`, then ``overrides``."""
        return AisOpener(**{"endpoint": self.url, **OPENER_DEFAULTS, **overrides})

    def registry(self, **overrides: Any) -> OpenerRegistry:
        """A registry whose ``ais`` opener is :meth:`opener` ``(**overrides)``."""
        registry = OpenerRegistry()
        registry.register("ais", self.opener(**overrides), override=True)
        return registry

    def client(self) -> Any:
        """An ``aistore.sdk.Client`` for :attr:`url`, SDK retries off."""
        from aistore.sdk import Client

        from tests.emulators.ais.fixtures import no_retry_config

        return Client(self.url, retry_config=no_retry_config(), timeout=(2, 20))


class EmulatorBackend(AisBackend):
    """The AIStore emulator (``tests/emulators/ais``), already reset by its fixture."""

    kind = "emulator"

    def __init__(self, emu: AisEmulator) -> None:
        super().__init__(emu.url)
        self._emu = emu

    @property
    def emulator(self) -> AisEmulator:
        return self._emu

    def create_bucket(self, name: str) -> str:
        self._emu.store.create_bucket(name, exist_ok=True)
        return name

    def put_object(self, bucket: str, name: str, data: bytes) -> None:
        self._emu.store.put_object(bucket, name, data)

    def get_object(self, bucket: str, name: str) -> bytes | None:
        if not self._emu.store.has_object(bucket, name):
            return None
        return bytes(self._emu.store.get_object(bucket, name).data)

    def pending_uploads(self, bucket: str) -> list[str]:
        return sorted({n for _, b, n in self._emu.store.pending_uploads() if b == bucket})

    def port_for(self, bucket: str, name: str) -> int:
        return int(self._emu.port)


class RealBackend(AisBackend):
    """A real AIStore cluster (``tests/servers/aistore.py``): one proxy, two targets.

    A GET to the proxy is redirected (301) to the target that owns the object, so the bytes
    of a read flow from that target: :meth:`port_for` reads the redirect's ``Location``.
    Incomplete multipart uploads are not listed by the API; :meth:`pending_uploads` finds their
    parts on the targets' mountpaths (``<mountpath>/@ais/<bucket>/%ch/<name>.<upload>.<part>``),
    leaving out those of a completed upload (AIStore 5.0 stores such an object in its chunks,
    with a manifest in ``%ut/<name>`` naming the upload).
    """

    kind = "real"

    def __init__(self, cluster: Cluster) -> None:
        super().__init__(cluster.endpoint)
        self.cluster = cluster
        self._suffix = secrets.token_hex(4)
        self._created: list[str] = []
        self._sdk: Any = None

    def _bucket(self, bucket: str) -> Any:
        if self._sdk is None:
            self._sdk = self.client()
        return self._sdk.bucket(bucket)

    def bucket_name(self, name: str) -> str:
        return f"{name}-{self._suffix}"

    def create_bucket(self, name: str) -> str:
        actual = self.bucket_name(name)
        if actual not in self._created:
            self._bucket(actual).create(exist_ok=True)
            self._created.append(actual)
        return actual

    def put_object(self, bucket: str, name: str, data: bytes) -> None:
        self._bucket(bucket).object(name).get_writer().put_content(data)

    def get_object(self, bucket: str, name: str) -> bytes | None:
        from aistore.sdk.errors import AISError

        try:
            return bytes(self._bucket(bucket).object(name).get_reader().read_all())
        except AISError as exc:
            if exc.status_code == 404:
                return None
            raise

    def _mountpaths(self) -> list[Path]:
        return [p for node in self.cluster.nodes[1:] for p in sorted(node.root.glob("mp*"))]

    def pending_uploads(self, bucket: str) -> list[str]:
        chunks = {}  # (object name, upload id) of every chunk file
        manifests = {}  # object name -> its committed manifest's bytes
        for mountpath in self._mountpaths():
            root = mountpath / "@ais" / bucket
            for part in (root / "%ch").rglob("*"):
                if part.is_file():  # <object name>.<upload id>.<part number>
                    name, upload, _ = str(part.relative_to(root / "%ch")).rsplit(".", 2)
                    chunks[name, upload] = part
            for manifest in (root / "%ut").rglob("*"):
                if manifest.is_file():
                    manifests[str(manifest.relative_to(root / "%ut"))] = manifest.read_bytes()
        # a completed upload keeps its chunks (the object is stored chunked); its manifest
        # names the upload id, which is all this looks for in the (binary) manifest
        return sorted(
            {n for n, u in chunks if u.encode() not in manifests.get(n, b"")},
        )

    def port_for(self, bucket: str, name: str) -> int:
        url = f"{self.url}/v1/objects/{quote(bucket)}/{quote(name)}"
        answer = requests.get(url, allow_redirects=False, timeout=10)
        answer.close()
        location = answer.headers.get("Location")
        if answer.status_code != 301 or not location:
            raise AssertionError(f"no redirect to a target for {url}: {answer.status_code}")
        port = urlsplit(location).port
        assert port is not None, location
        return port

    def cleanup(self) -> None:
        for bucket in self._created:
            self._bucket(bucket).delete(missing_ok=True)
        self._created = []
