"""SageMaker channels as WebDataset sources: File, FastFile and Pipe mode behind one call.

File and FastFile mode: the channel directory holds the shards; they are listed (recursively,
by extension, sorted) and split among hosts unless SageMaker already split them
(``ShardedByS3Key``). Pipe mode: every epoch is one FIFO, ``<channel>_<epoch>``, carrying all the
channel's objects back to back; it is read as one concatenated tar stream, so no shard is cut
off at the first end-of-archive marker.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass

from wds_cloud.core.handlers import Handler, reraise_exception
from wds_cloud.core.samples import Sample, tar_samples
from wds_cloud.core.shards import dataloader_worker_info, node_info
from wds_cloud.errors import ConfigError
from wds_cloud.sagemaker.env import ChannelConfig, SageMakerEnv
from wds_cloud.sagemaker.fifo import DEFAULT_OPEN_TIMEOUT, open_fifo

log = logging.getLogger(__name__)

DEFAULT_EXTENSIONS = (".tar", ".tgz", ".tar.gz")


def _env_int(environ: Mapping[str, str], name: str) -> int | None:
    value = environ.get(name)
    if value is None or value == "":
        return None
    try:
        return int(value)
    except ValueError as exc:
        raise ConfigError(f"${name} must be an integer, got {value!r}") from exc


def list_channel_files(directory: str, extensions: Iterable[str] = DEFAULT_EXTENSIONS) -> list[str]:
    """Return the files under ``directory`` (recursively) whose names end with an extension.

    Sorted by path relative to ``directory``. Symbolic links to files are included;
    directories reached through symbolic links are not entered.

    Raises:
        ConfigError: ``directory`` is not a directory.
    """
    if not os.path.isdir(directory):
        raise ConfigError(f"SageMaker channel directory {directory} does not exist")
    exts = tuple(e.lower() for e in extensions)
    found: list[tuple[str, str]] = []
    ignored = 0
    for dirpath, dirnames, filenames in os.walk(directory):
        dirnames.sort()
        for fname in filenames:
            full = os.path.join(dirpath, fname)
            if fname.lower().endswith(exts):
                found.append((os.path.relpath(full, directory), full))
            else:
                ignored += 1
    if ignored:
        log.info("%s: %d file(s) without extension %s not used", directory, ignored, exts)
    return [full for _, full in sorted(found)]


@dataclass(frozen=True)
class ChannelSource:
    """A resolved channel: what one reader (host or process) reads.

    Attributes:
        channel: the channel configuration.
        all_urls: File/FastFile: every shard path of the channel on this host, sorted; empty
            in Pipe mode.
        rank: this reader's index among the readers the data is split across.
        world_size: number of such readers (1: no split).
        epoch: first epoch (Pipe mode: the first FIFO to read).
    """

    channel: ChannelConfig
    all_urls: tuple[str, ...]
    rank: int
    world_size: int
    epoch: int = 0

    @property
    def mode(self) -> str:
        """``"File"``, ``"FastFile"`` or ``"Pipe"``."""
        return self.channel.mode

    @property
    def is_pipe(self) -> bool:
        """Whether the channel is read through per-epoch FIFOs."""
        return self.channel.is_pipe

    @property
    def urls(self) -> list[str]:
        """This reader's shards (File/FastFile): ``all_urls[rank::world_size]``."""
        return list(self.all_urls[self.rank :: self.world_size])

    def fifo(self, epoch: int | None = None) -> str:
        """The Pipe-mode FIFO of ``epoch`` (default: the first epoch)."""
        return self.channel.fifo_path(self.epoch if epoch is None else epoch)

    def __iter__(self) -> Iterator[str]:
        """This reader's shard paths, so ``WebDataset(source)`` works in File/FastFile mode.

        Raises:
            ConfigError: Pipe mode (a FIFO stream needs :func:`sagemaker_dataset`).
        """
        if self.is_pipe:
            raise ConfigError(
                f"channel {self.channel.name!r} is in Pipe mode: its FIFOs carry many tars back "
                "to back; read it with wds_cloud.sagemaker.sagemaker_dataset(...)"
            )
        return iter(self.urls)


def _split_plan(
    channel: ChannelConfig, env: SageMakerEnv, rank: int | None, world_size: int | None
) -> tuple[int, int]:
    if (rank is None) != (world_size is None):
        raise ConfigError("pass both rank= and world_size=, or neither")
    if rank is not None and world_size is not None:
        if world_size < 1 or not 0 <= rank < world_size:
            raise ConfigError(f"rank {rank} is not in [0, world_size={world_size})")
        return rank, world_size
    local_world = _env_int(env.environ, "LOCAL_WORLD_SIZE") or 1
    local_rank = _env_int(env.environ, "LOCAL_RANK") or 0
    if channel.is_pipe:
        if local_world > 1:
            raise ConfigError(
                f"channel {channel.name!r} is in Pipe mode: each epoch's FIFO can be read by "
                f"one process per host, but LOCAL_WORLD_SIZE={local_world}; read the channel "
                "in one process, or use File/FastFile mode"
            )
        if channel.distribution == "ShardedByS3Key":
            return 0, 1
        return env.host_rank, env.num_hosts
    if channel.distribution == "ShardedByS3Key":
        # This host's data is already its own: split only among processes on this host.
        return local_rank, local_world
    grank, gworld = node_info()
    if gworld > 1:
        return grank, gworld  # torch.distributed / RANK+WORLD_SIZE span every host's processes
    return env.host_rank, env.num_hosts


def channel_shards(
    name: str,
    *,
    epoch: int = 0,
    extensions: Iterable[str] = DEFAULT_EXTENSIONS,
    env: SageMakerEnv | None = None,
    mode: str | None = None,
    rank: int | None = None,
    world_size: int | None = None,
) -> ChannelSource:
    """Resolve channel ``name`` into what this process reads, whatever the input mode.

    Splitting (File/FastFile): with ``FullyReplicated`` shards are divided among
    ``RANK``/``WORLD_SIZE`` (or ``torch.distributed``) when that world is larger than 1, else
    among SageMaker hosts; with ``ShardedByS3Key`` (data already split by SageMaker) only among
    the processes of this host (``LOCAL_RANK``/``LOCAL_WORLD_SIZE``). Pipe mode: one reader per
    host; with ``FullyReplicated`` and several hosts, samples are divided among hosts.

    Args:
        name: the channel (``"train"``).
        epoch: the first epoch (Pipe mode: the first FIFO read is ``<name>_<epoch>``).
        extensions: file name endings that count as shards (File/FastFile).
        env: the environment (default: ``SageMakerEnv()``).
        mode: force the input mode instead of reading it from ``inputdataconfig.json``.
        rank: override this reader's index (with ``world_size``).
        world_size: override the number of readers.

    Raises:
        ConfigError: unknown channel, missing directory, no shard, fewer shards than readers,
            several processes per host in Pipe mode.
    """
    env = env or SageMakerEnv()
    channel = env.channel(name, mode=mode)
    r, w = _split_plan(channel, env, rank, world_size)
    if channel.is_pipe:
        return ChannelSource(channel, (), r, w, epoch)
    paths = list_channel_files(channel.path, extensions)
    if not paths:
        raise ConfigError(
            f"SageMaker channel {name!r} ({channel.mode} mode): no files ending with "
            f"{tuple(extensions)} under {channel.path}"
        )
    if len(paths) < w:
        raise ConfigError(
            f"SageMaker channel {name!r}: {len(paths)} shard(s) under {channel.path} for "
            f"{w} readers; every reader needs at least one shard"
        )
    return ChannelSource(channel, tuple(paths), r, w, epoch)


class PipeChannel:
    """The samples of a Pipe-mode channel; every ``iter()`` reads the next epoch's FIFO.

    The first ``iter()`` reads ``<channel>_<epoch>``, the next ``<channel>_<epoch + 1>``, and
    so on; :meth:`set_epoch` chooses the epoch explicitly (needed with DataLoader workers that
    are not persistent, since a worker's copy cannot advance the parent's counter).

    Args:
        source: the resolved Pipe-mode channel.
        handler: error policy for read errors and malformed samples.
        select_files: keep only members for which this returns True.
        rename_files: map member names before grouping.
        open_timeout: seconds to wait for each FIFO and its writer.
        read_timeout: seconds without data after which a read fails (None: no limit).

    Raises:
        ConfigError: (on ``iter()``) more than one DataLoader worker: a FIFO has one reader.
    """

    def __init__(
        self,
        source: ChannelSource,
        *,
        handler: Handler = reraise_exception,
        select_files: Callable[[str], bool] | None = None,
        rename_files: Callable[[str], str] | None = None,
        open_timeout: float = DEFAULT_OPEN_TIMEOUT,
        read_timeout: float | None = None,
    ) -> None:
        if not source.is_pipe:
            raise ConfigError(f"channel {source.channel.name!r} is not in Pipe mode")
        self.source = source
        self.epoch = source.epoch
        self.handler = handler
        self.select_files = select_files
        self.rename_files = rename_files
        self.open_timeout = open_timeout
        self.read_timeout = read_timeout

    def set_epoch(self, epoch: int) -> None:
        """Read ``<channel>_<epoch>`` on the next ``iter()``."""
        self.epoch = int(epoch)

    def __iter__(self) -> Iterator[Sample]:
        _, nworkers = dataloader_worker_info()
        if nworkers > 1:
            raise ConfigError(
                f"SageMaker channel {self.source.channel.name!r} is in Pipe mode: each epoch is "
                f"one FIFO that only one reader can consume, but the DataLoader has {nworkers} "
                "workers; use num_workers=0 or 1 (or File/FastFile mode)"
            )
        path = self.source.fifo(self.epoch)
        self.epoch += 1
        return self._samples(path)

    def _samples(self, path: str) -> Iterator[Sample]:
        stream = open_fifo(path, timeout=self.open_timeout, read_timeout=self.read_timeout)
        rank, world = self.source.rank, self.source.world_size
        samples = tar_samples(
            stream,
            path,
            handler=self.handler,
            select_files=self.select_files,
            rename_files=self.rename_files,
            concatenated=True,
        )
        try:
            if world > 1:
                for i, sample in enumerate(samples):
                    if i % world == rank:
                        yield sample
            else:
                yield from samples
        finally:
            samples.close()
            stream.close()  # a writer still writing now gets EPIPE instead of blocking

    def __repr__(self) -> str:
        return f"PipeChannel({self.source.channel.fifo_path(self.epoch)!r})"
