"""``sagemaker_dataset``: one line for a SageMaker channel in File, FastFile or Pipe mode."""

from __future__ import annotations

import importlib.util
import logging
import os
from collections.abc import Iterable
from typing import Any

from wds_cloud.core.shards import SplitReaders
from wds_cloud.errors import ConfigError
from wds_cloud.sagemaker.channels import (
    DEFAULT_EXTENSIONS,
    ChannelSource,
    PipeChannel,
    channel_shards,
)
from wds_cloud.sagemaker.env import SageMakerEnv
from wds_cloud.sagemaker.fifo import DEFAULT_OPEN_TIMEOUT

log = logging.getLogger(__name__)


def _classes() -> Any:
    """The module whose ``WebDataset``/``FluidWrapper`` the package exports: torch
    ``IterableDataset`` subclasses when torch is installed, plain iterables otherwise."""
    if importlib.util.find_spec("torch") is not None:
        from wds_cloud import pytorch

        return pytorch
    from wds_cloud.core import compat

    return compat


# WebDataset arguments that mean something for a single FIFO stream.
_PIPE_KW = frozenset({"handler", "select_files", "rename_files", "empty_check"})


def _open_timeout(environ: Any, value: float | None) -> float:
    if value is not None:
        return float(value)
    raw = environ.get("WDS_CLOUD_SM_PIPE_TIMEOUT")
    if raw is None or raw == "":
        return DEFAULT_OPEN_TIMEOUT
    try:
        return float(raw)
    except ValueError as exc:
        raise ConfigError(f"$WDS_CLOUD_SM_PIPE_TIMEOUT must be seconds, got {raw!r}") from exc


def sagemaker_dataset(
    channel: str | ChannelSource,
    *,
    epoch: int = 0,
    env: SageMakerEnv | None = None,
    extensions: Iterable[str] = DEFAULT_EXTENSIONS,
    mode: str | None = None,
    rank: int | None = None,
    world_size: int | None = None,
    open_timeout: float | None = None,
    read_timeout: float | None = None,
    **webdataset_kw: Any,
) -> Any:
    """A ``WebDataset`` over a SageMaker channel, whatever its input mode.

    File/FastFile mode: ``wds.WebDataset(<channel's shard paths>, nodesplitter=<this reader's
    share>, **webdataset_kw)``; every ``WebDataset`` option works (``shardshuffle``,
    ``handler``, ...). Pipe mode: a ``FluidWrapper`` over :class:`PipeChannel` (each ``iter()``
    reads the next epoch's FIFO; ``set_epoch`` picks one); only ``handler``, ``select_files``,
    ``rename_files`` and ``empty_check`` apply, ``shardshuffle`` is ignored with a warning (the
    order is SageMaker's, see the channel's ``ShuffleConfig``). Both are torch
    ``IterableDataset`` objects when torch is installed and have the fluid methods
    (``.shuffle()``, ``.decode()``, ``.to_tuple()``, ``.batched()``).

    Args:
        channel: a channel name or a :func:`channel_shards` result.
        epoch: first epoch (Pipe: the first FIFO read).
        env: the SageMaker environment (default: ``SageMakerEnv()``).
        extensions: shard file endings (File/FastFile).
        mode: force the input mode.
        rank: override the reader index (with ``world_size``).
        world_size: override the number of readers.
        open_timeout: Pipe mode: seconds to wait for each FIFO and its writer (default
            ``$WDS_CLOUD_SM_PIPE_TIMEOUT`` or 600).
        read_timeout: Pipe mode: seconds without data before a read fails (default: no limit).
        **webdataset_kw: passed to ``WebDataset``.

    Raises:
        ConfigError: see :func:`channel_shards`; a ``WebDataset`` option that Pipe mode cannot
            honour.
    """
    if isinstance(channel, ChannelSource):
        source = channel
        environ: Any = env.environ if env is not None else os.environ
    else:
        env = env or SageMakerEnv()
        environ = env.environ
        source = channel_shards(
            channel,
            epoch=epoch,
            extensions=extensions,
            env=env,
            mode=mode,
            rank=rank,
            world_size=world_size,
        )
    if not source.is_pipe:
        webdataset_kw.setdefault("nodesplitter", SplitReaders(source.rank, source.world_size))
        return _classes().WebDataset(list(source.all_urls), **webdataset_kw)

    if webdataset_kw.get("shardshuffle") not in (None, False, 0):
        log.warning(
            "channel %r is in Pipe mode: shardshuffle is ignored (objects arrive in the order "
            "SageMaker streams them; set ShuffleConfig on the channel to shuffle them)",
            source.channel.name,
        )
    webdataset_kw.pop("shardshuffle", None)
    unsupported = sorted(set(webdataset_kw) - _PIPE_KW)
    if unsupported:
        raise ConfigError(
            f"channel {source.channel.name!r} is in Pipe mode (one FIFO stream per epoch): "
            f"WebDataset options {unsupported} do not apply; supported: {sorted(_PIPE_KW)}"
        )
    empty_check = webdataset_kw.pop("empty_check", True)
    pipe = PipeChannel(
        source,
        open_timeout=_open_timeout(environ, open_timeout),
        read_timeout=read_timeout,
        **webdataset_kw,
    )
    dataset = _classes().FluidWrapper(pipe)
    if empty_check:
        from wds_cloud.core.stages import check_empty

        dataset.append(check_empty)
    return dataset
