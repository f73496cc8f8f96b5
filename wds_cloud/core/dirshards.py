"""webdataset's ``DirectoryShardList``: a local directory used as a queue of shards.

Producers drop shard files into a directory; any number of readers (processes, DataLoader
workers, machines sharing the directory) take them. A reader *claims* a shard by renaming
``x.tar`` to ``x.tar._<pid>_`` (a rename is atomic, so exactly one reader gets it) and yields that
path. When the consumer asks for the next shard, the finished one is recycled by ``mode``:

- ``"resample"`` (default): renamed back to ``x.tar``, to be read again (an endless stream);
- ``"unlink"``: deleted;
- ``"keep"``: renamed to ``x.tar._done_`` (no longer matched by ``pattern``).

A claimed shard whose consumer never comes back stays claimed until its process ends; then any
reader recycles it (claims of processes that are no longer running are recycled after each
shard, :meth:`DirectoryShardList.cleanup_files_without_processes`). Process ids are those of
this machine: readers on several machines sharing the directory cannot tell each other's live
claims from dead ones.

With no shard to take, a reader waits ``poll`` seconds and looks again, for at most ``timeout``
seconds since it last got one; ``poll=None`` ends the iteration instead.
"""

from __future__ import annotations

import glob
import logging
import os
import random
import re
import time
from collections.abc import Iterator

from wds_cloud.braces import parse_braces
from wds_cloud.errors import ConfigError

log = logging.getLogger(__name__)

MODES = ("resample", "unlink", "keep")
SELECTS = ("random", "oldest")
_CLAIM = re.compile(r"^(.*)\._(\d+)_$")
_LAST_EXTENSION = re.compile(r"\.[^.]*$")


def check_pid_is_running(pid: int) -> bool:
    """True if a process ``pid`` exists on this machine (also one of another user)."""
    try:
        os.kill(pid, 0)
    except PermissionError:
        return True  # it exists, it is just not ours to signal
    except (OSError, OverflowError):
        return False
    return True


def without_last_extension(fname: str) -> str:
    """``fname`` without its last ``.extension`` (``x.tar._12_`` -> ``x.tar``)."""
    return _LAST_EXTENSION.sub("", fname)


def get_pid_from_filename(fname: str) -> int | None:
    """The process id in a claimed name ``x.tar._<pid>_``, else None."""
    match = _CLAIM.match(fname)
    return int(match.group(2)) if match else None


class DirectoryShardList:
    """Take shards from a directory as a queue; see the module docstring.

    Args:
        path: the directory, ending in ``/``.
        pattern: glob of the shard names, with brace alternatives
            (default ``*.{tar,tgz,tar.tgz}``).
        poll: seconds between looks at an empty directory; None: stop when it is empty.
        timeout: stop after this many seconds without a shard.
        mode: ``"resample"``, ``"unlink"`` or ``"keep"``: what happens to a finished shard.
        select: ``"random"`` or ``"oldest"`` (smallest modification time) shard first.
        fate: unused (webdataset's signature).
        seed: seed for ``select="random"`` (default: fresh randomness).

    Raises:
        ConfigError: ``path`` does not end in ``/`` or is not a directory, or an unknown
            ``mode``/``select``.
    """

    def __init__(
        self,
        path: str,
        pattern: str = "*.{tar,tgz,tar.tgz}",
        poll: float | None = 1,
        timeout: float = 1e12,
        mode: str = "resample",
        select: str = "random",
        fate: object = None,
        *,
        seed: int | None = None,
    ) -> None:
        if not path.endswith("/"):
            raise ConfigError(f"DirectoryShardList: the path must end in '/', got {path!r}")
        if not os.path.isdir(path):
            raise ConfigError(f"DirectoryShardList: {path!r} is not a directory")
        if mode not in MODES:
            raise ConfigError(f"DirectoryShardList: mode must be one of {MODES}, got {mode!r}")
        if select not in SELECTS:
            raise ConfigError(f"unknown selection strategy {select!r}; use one of {SELECTS}")
        self.path = path
        self.pattern = pattern
        self.poll = poll
        self.timeout = timeout
        self.mode = mode
        self.select = select
        self.fate = fate
        self.rng = random.Random(seed)

    def candidates(self) -> list[str]:
        """The unclaimed shards now in the directory, sorted."""
        names: set[str] = set()
        for pattern in parse_braces(self.pattern):
            names.update(glob.glob(pattern, root_dir=self.path))
        return sorted(self.path + name for name in names)

    def _choose(self, candidates: list[str]) -> str | None:
        if self.select == "random":
            return self.rng.choice(candidates)
        aged = []
        for name in candidates:
            try:
                aged.append((os.stat(name).st_mtime, name))
            except FileNotFoundError:  # claimed by another reader meanwhile
                continue
        return min(aged)[1] if aged else None

    def recycle(self, activename: str) -> None:
        """Put a finished (claimed) shard where ``mode`` says."""
        try:
            if self.mode == "unlink":
                os.unlink(activename)
            elif self.mode == "keep":
                os.rename(activename, without_last_extension(activename) + "._done_")
            else:
                os.rename(activename, without_last_extension(activename))
        except FileNotFoundError:  # removed by its consumer, or recycled by another reader
            log.debug("DirectoryShardList: %s was gone before recycling", activename)

    def cleanup_files_without_processes(self) -> None:
        """Recycle the claims of processes that are no longer running."""
        for name in glob.glob("*._*_", root_dir=self.path):
            pid = get_pid_from_filename(name)
            if pid is not None and not check_pid_is_running(pid):
                self.recycle(self.path + name)

    def __iter__(self) -> Iterator[dict[str, str]]:
        last = time.monotonic()
        while time.monotonic() - last < self.timeout:
            candidates = self.candidates()
            candidate = self._choose(candidates) if candidates else None
            if candidate is None:
                if self.poll is None:
                    return
                time.sleep(self.poll)
                continue
            activename = f"{candidate}._{os.getpid()}_"
            try:
                os.rename(candidate, activename)
            except FileNotFoundError:  # another reader claimed it first
                continue
            yield {"url": activename}
            last = time.monotonic()
            self.recycle(activename)
            self.cleanup_files_without_processes()

    def __repr__(self) -> str:
        return f"DirectoryShardList({self.path!r}, pattern={self.pattern!r}, mode={self.mode!r})"
