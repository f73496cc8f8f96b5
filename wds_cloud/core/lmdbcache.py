"""``LMDBCached``: record a pipeline's first complete pass in an LMDB file and replay it after.

``wds.DataPipeline(..., wds.LMDBCached("cache.lmdb"))`` or ``dataset.lmdb_cached("cache.lmdb")``
(webdataset 1.0.2's stage; needs the ``lmdb`` package: ``pip install 'wds_cloud[lmdb]'``).
The first pass yields the upstream samples and stores each (pickled by default); once a pass
has completed, the file is marked complete and later passes, in this process or a later one,
read the file instead of the upstream. A pass abandoned early leaves the file incomplete, and
the next pass records again from the start.

Differences from webdataset, both to lose nothing: samples are stored under their position in
the pass, so replay keeps the order and every sample (webdataset stores them under
``__key__``, so samples sharing a key collapse into one and replay comes in key order); and the
stage refuses to run in several DataLoader workers at once (they would write one file and mark
it complete before the others finish): give each worker its own file.
"""

from __future__ import annotations

import pickle
from collections.abc import Iterator
from typing import Any

from wds_cloud.errors import ConfigError, MissingDependencyError

__all__ = ["LMDBCached"]

_COMPLETE = b"_"


class LMDBCached:
    """Pipeline stage caching its input in the LMDB environment at ``fname``.

    Args:
        fname: the LMDB directory (created if missing).
        map_size: the largest size the file may grow to (sparse on Linux).
        pickler: object with ``dumps``/``loads`` (default :mod:`pickle`).
        chunksize: samples written per transaction.
    """

    def __init__(
        self, fname: str, map_size: float = 1e12, pickler: Any = pickle, chunksize: int = 500
    ) -> None:
        if chunksize < 1:
            raise ConfigError(f"LMDBCached: chunksize must be >= 1, got {chunksize}")
        self.fname = str(fname)
        self.map_size = int(map_size)
        self.pickler = pickler
        self.chunksize = chunksize
        self._db: Any = None
        self._open()  # create the file now, as webdataset does

    def _open(self) -> Any:
        if self._db is None:
            try:
                import lmdb
            except ImportError:
                raise MissingDependencyError("LMDBCached needs lmdb", extra="lmdb") from None
            self._db = lmdb.open(self.fname, readonly=False, map_size=self.map_size)
        return self._db

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_db"] = None  # LMDB handles do not cross processes; reopened on use
        if state["pickler"] is pickle:
            state["pickler"] = None  # modules do not pickle
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        if self.pickler is None:
            self.pickler = pickle

    def close(self) -> None:
        """Close the LMDB environment (reopened on the next use)."""
        if self._db is not None:
            self._db.close()
            self._db = None

    def is_complete(self) -> bool:
        """Whether a complete pass is recorded."""
        with self._open().begin(write=False) as txn:
            return txn.get(_COMPLETE) is not None

    def run(self, src: Any) -> Iterator[Any]:
        """Replay the recorded pass, or record this one."""
        from wds_cloud.core.shards import dataloader_worker_info

        _, nworkers = dataloader_worker_info()
        if nworkers > 1:
            raise ConfigError(
                f"LMDBCached({self.fname!r}) runs in {nworkers} DataLoader workers, which would "
                "write one file; give each worker its own file, or cache before the loader"
            )
        if self.is_complete():
            return self._replay()
        return self._record(src)

    def _replay(self) -> Iterator[Any]:
        with self._open().begin(write=False) as txn:
            for key, value in txn.cursor():
                if key != _COMPLETE:
                    yield self.pickler.loads(value)

    def _record(self, src: Any) -> Iterator[Any]:
        db = self._open()
        with db.begin(write=True) as txn:
            txn.drop(db.open_db(), delete=False)  # an incomplete earlier pass starts over
        buffer: list[tuple[bytes, bytes]] = []
        count = 0
        for sample in src:
            buffer.append((b"%012d" % count, self.pickler.dumps(sample)))
            count += 1
            if len(buffer) >= self.chunksize:
                self._put(buffer)
                buffer = []
            yield sample
        buffer.append((_COMPLETE, b"%d" % count))
        self._put(buffer)

    def _put(self, items: list[tuple[bytes, bytes]]) -> None:
        with self._open().begin(write=True) as txn:
            for key, value in items:
                txn.put(key, value)
