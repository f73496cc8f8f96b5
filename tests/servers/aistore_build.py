"""Find or build AIStore's ``aisnode`` and ``authn`` binaries for one pinned release.

The binaries live in a cache directory keyed by version: ``WDS_CLOUD_AIS_BIN_DIR`` when set,
else ``$XDG_CACHE_HOME/wds_cloud/aistore/<version>/`` (``~/.cache`` when unset). When one is
missing, both are built from the Go module proxy with ``go install``, into that directory.

Why a throwaway module rather than ``go install github.com/NVIDIA/aistore/cmd/aisnode@v1.5.0``:
``go install pkg@version`` also asks the proxy for the module's version list (to look for a
deprecation notice) and fails when the proxy refuses that list, as the one this project can
reach does (403). A module that requires ``github.com/NVIDIA/aistore v1.5.0`` resolves the very
same dependency versions (AIStore's own ``go.mod`` lists every one it needs) and ``go get``
treats a missing deprecation notice as a warning. Build caches (``GOCACHE``, ``GOMODCACHE``)
live in ``.go/`` inside the cache directory, written removable (``-modcacherw``), so deleting
the directory removes everything the build left.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

MODULE = "github.com/NVIDIA/aistore"
DEFAULT_VERSION = "v1.5.0"  # AIStore 5.0
#: (binary, package, build tags): dSort is compiled in only with ``dsort``; ``aws`` adds S3
AIS_BINARIES = (
    ("aisnode", f"{MODULE}/cmd/aisnode", "dsort aws"),
    ("authn", f"{MODULE}/cmd/authn", ""),
)
BIN_DIR_ENV = "WDS_CLOUD_AIS_BIN_DIR"
_BUILD_TIMEOUT = 1800.0


class BinariesUnavailable(RuntimeError):
    """The binaries are not in the cache and cannot be built here (the message says why)."""


class GoNotFound(BinariesUnavailable):
    """The binaries are not in the cache and there is no ``go`` to build them."""


@dataclass(frozen=True)
class Paths:
    """Where the binaries of one AIStore version are.

    Attributes:
        directory: the cache directory.
        aisnode: the node binary (proxy or target).
        authn: the AuthN server binary.
        build_seconds: how long this call spent building them; None when they were cached.
    """

    directory: Path
    aisnode: Path
    authn: Path
    build_seconds: float | None = None


def cache_dir(version: str = DEFAULT_VERSION, environ: Mapping[str, str] | None = None) -> Path:
    """The binaries' directory for ``version`` (``WDS_CLOUD_AIS_BIN_DIR`` wins)."""
    env = os.environ if environ is None else environ
    override = env.get(BIN_DIR_ENV)
    if override:
        return Path(override).expanduser()
    root = Path(env.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return root / "wds_cloud" / "aistore" / version


def _found(directory: Path) -> Paths | None:
    paths = Paths(directory, directory / "aisnode", directory / "authn")
    if all(p.is_file() and os.access(p, os.X_OK) for p in (paths.aisnode, paths.authn)):
        return paths
    return None


@contextlib.contextmanager
def _locked(directory: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``directory`` (two pytest sessions must not build at once)."""
    with open(directory / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _run(args: list[str], cwd: Path, env: Mapping[str, str], log: Path) -> None:
    with open(log, "ab") as out:
        out.write(f"$ {' '.join(args)}\n".encode())
        out.flush()
        code = subprocess.run(
            args,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            timeout=_BUILD_TIMEOUT,
        ).returncode
    if code != 0:
        tail = log.read_text(errors="replace").strip().splitlines()[-15:]
        raise BinariesUnavailable(
            f"`{' '.join(args)}` exited with {code} (full log: {log}):\n" + "\n".join(tail)
        )


def _build(go: str, version: str, directory: Path) -> None:
    caches = directory / ".go"
    env = dict(os.environ)
    env.update(
        GOBIN=str(directory),
        GOCACHE=str(caches / "build"),
        GOMODCACHE=str(caches / "mod"),
    )
    log = directory / "build.log"
    log.write_text("")
    with tempfile.TemporaryDirectory(prefix="wds-ais-build-") as tmp:
        work = Path(tmp)
        (work / "go.mod").write_text("module wdscloud.test/aisbuild\n\ngo 1.26\n")
        packages = [f"{pkg}@{version}" for _, pkg, _ in AIS_BINARIES]
        tags = " ".join(sorted({t for _, _, tag in AIS_BINARIES for t in tag.split()}))
        _run([go, "get", "-modcacherw", "-tags", tags, *packages], work, env, log)
        for _, pkg, tag in AIS_BINARIES:
            tag_args = ["-tags", tag] if tag else []
            _run([go, "install", "-modcacherw", *tag_args, pkg], work, env, log)


def ensure_binaries(version: str = DEFAULT_VERSION) -> Paths:
    """Paths of ``aisnode`` and ``authn`` of ``version``, built into the cache when missing.

    Raises:
        GoNotFound: the binaries are missing and ``go`` is not on ``PATH``.
        BinariesUnavailable: the build failed (the reason and the last lines of its log).
    """
    directory = cache_dir(version)
    found = _found(directory)
    if found is not None:
        return found
    go = shutil.which("go")
    if go is None:
        raise GoNotFound(
            f"AIStore {version} binaries are not in {directory} and `go` is not on PATH to "
            f"build them (install Go >= 1.26, or set {BIN_DIR_ENV} to a directory holding "
            "aisnode and authn)"
        )
    directory.mkdir(parents=True, exist_ok=True)
    with _locked(directory):
        found = _found(directory)  # another session may have built them meanwhile
        if found is not None:
            return found
        start = time.monotonic()
        _build(go, version, directory)
        built = _found(directory)
        if built is None:
            raise BinariesUnavailable(f"`go install` ran but left no binaries in {directory}")
        return Paths(built.directory, built.aisnode, built.authn, time.monotonic() - start)
