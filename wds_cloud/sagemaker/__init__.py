"""SageMaker input channels (File, FastFile and Pipe mode) as WebDataset sources.

One line in a training script reads a channel in any input mode::

    from wds_cloud.sagemaker import sagemaker_dataset

    dataset = sagemaker_dataset("train", shardshuffle=True).shuffle(1000).decode()

See ``docs/sagemaker.md``. Nothing here imports torch or reads the environment at import time.
"""

from __future__ import annotations

from wds_cloud.core.shards import SplitReaders
from wds_cloud.sagemaker.channels import (
    DEFAULT_EXTENSIONS,
    ChannelSource,
    PipeChannel,
    channel_shards,
    list_channel_files,
)
from wds_cloud.sagemaker.dataset import sagemaker_dataset
from wds_cloud.sagemaker.env import ChannelConfig, SageMakerEnv
from wds_cloud.sagemaker.fifo import FifoReader, open_fifo

__all__ = [
    "DEFAULT_EXTENSIONS",
    "ChannelConfig",
    "ChannelSource",
    "FifoReader",
    "PipeChannel",
    "SageMakerEnv",
    "SplitReaders",
    "channel_shards",
    "list_channel_files",
    "open_fifo",
    "sagemaker_dataset",
]
