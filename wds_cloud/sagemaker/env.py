"""Resolve SageMaker input channels, their input mode and this host's rank from the container.

What SageMaker provides (verified against the SageMaker developer guide, "How Amazon SageMaker
Provides Training Information", and ``sagemaker_training/environment.py`` of the
sagemaker-training-toolkit):

- ``<root>/input/config/inputdataconfig.json``: ``{channel: {"TrainingInputMode": "File" |
  "FastFile" | "Pipe", "S3DistributionType": "FullyReplicated" | "ShardedByS3Key",
  "ContentType": ..., "RecordWrapperType": "None" | "RecordIO", "CompressionType": ...}}``.
  The toolkit exports the same JSON as ``SM_INPUT_DATA_CONFIG``.
- ``<root>/input/config/resourceconfig.json``: ``{"current_host": "algo-1", "hosts": ["algo-1",
  "algo-2"], "network_interface_name": "eth0", ...}``; ``hosts`` is sorted lexicographically.
  The toolkit exports ``SM_HOSTS`` (JSON list) and ``SM_CURRENT_HOST``.
- File and FastFile mode: the channel is the directory ``<root>/input/data/<channel>``
  (``SM_CHANNEL_<CHANNEL>`` in upper case; ``SM_CHANNELS`` lists the channel names as JSON).
- Pipe mode: one FIFO per epoch, ``<root>/input/data/<channel>_<epoch>``, read in order
  ``_0, _1, ...``; the next one may appear only after the previous one was consumed.

The root is ``root=`` > ``$WDS_CLOUD_SM_ROOT`` > ``$SAGEMAKER_BASE_DIR`` (the toolkit's own
override) > ``/opt/ml``. Everything is read when :class:`SageMakerEnv` is created, never at
import.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from wds_cloud.errors import ConfigError

DEFAULT_ROOT = "/opt/ml"
INPUT_MODES = ("File", "FastFile", "Pipe")
DISTRIBUTIONS = ("FullyReplicated", "ShardedByS3Key")


@dataclass(frozen=True)
class ChannelConfig:
    """One input channel as SageMaker configured it.

    Attributes:
        name: the channel name (``"train"``).
        path: the channel directory (File/FastFile) or the FIFO prefix (Pipe):
            ``<root>/input/data/<name>``.
        mode: ``"File"``, ``"FastFile"`` or ``"Pipe"``.
        distribution: ``"FullyReplicated"`` (every host gets all data) or ``"ShardedByS3Key"``
            (SageMaker already gave each host its own subset of the objects).
        content_type: ``ContentType`` of the channel, if set.
        record_wrapper: ``RecordWrapperType`` (``"None"`` or ``"RecordIO"``), if set.
        compression: ``CompressionType`` (Pipe mode: ``"None"`` or ``"Gzip"``), if set.
    """

    name: str
    path: str
    mode: str = "File"
    distribution: str = "FullyReplicated"
    content_type: str | None = None
    record_wrapper: str | None = None
    compression: str | None = None

    @property
    def is_pipe(self) -> bool:
        """Whether the channel is read through per-epoch FIFOs."""
        return self.mode == "Pipe"

    def fifo_path(self, epoch: int) -> str:
        """The Pipe-mode FIFO of ``epoch``: ``<root>/input/data/<name>_<epoch>``."""
        if epoch < 0:
            raise ConfigError(f"epoch must be >= 0, got {epoch}")
        return f"{self.path}_{epoch}"


def _read_json(path: str) -> Any:
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read SageMaker config file {path}: {exc}") from exc


def _env_json(environ: Mapping[str, str], name: str) -> Any:
    value = environ.get(name)
    if value is None or value == "":
        return None
    try:
        return json.loads(value)
    except ValueError as exc:
        raise ConfigError(f"${name} is not valid JSON: {value!r}") from exc


class SageMakerEnv:
    """A snapshot of the SageMaker training environment (channels, modes, hosts).

    Args:
        root: the ``/opt/ml`` directory (default: ``$WDS_CLOUD_SM_ROOT``, then
            ``$SAGEMAKER_BASE_DIR``, then ``/opt/ml``).
        environ: the environment to read (default: ``os.environ``).

    Attributes:
        root: the resolved root directory.
        hosts: all hosts, sorted lexicographically as SageMaker sorts them.
        current_host: this host's name.
        host_rank: index of ``current_host`` in ``hosts``.
        num_hosts: ``len(hosts)``.

    Raises:
        ConfigError: a config file or ``SM_*`` variable is malformed, or ``current_host`` is not
            one of ``hosts``.
    """

    def __init__(self, root: str | None = None, environ: Mapping[str, str] | None = None) -> None:
        self.environ: Mapping[str, str] = os.environ if environ is None else environ
        env = self.environ
        chosen = root or env.get("WDS_CLOUD_SM_ROOT") or env.get("SAGEMAKER_BASE_DIR")
        self.root: str = os.path.abspath(chosen or DEFAULT_ROOT)
        self.config_dir = os.path.join(self.root, "input", "config")
        self.data_dir = os.path.join(self.root, "input", "data")

        data_config = _read_json(os.path.join(self.config_dir, "inputdataconfig.json"))
        if data_config is None:
            data_config = _env_json(env, "SM_INPUT_DATA_CONFIG") or {}
        if not isinstance(data_config, dict):
            raise ConfigError(f"inputdataconfig must be a JSON object, got {data_config!r}")
        self.input_data_config: dict[str, Any] = data_config

        resources = _read_json(os.path.join(self.config_dir, "resourceconfig.json"))
        if resources is not None and not isinstance(resources, dict):
            raise ConfigError(f"resourceconfig.json must be a JSON object, got {resources!r}")
        hosts = (resources or {}).get("hosts") or _env_json(env, "SM_HOSTS")
        current = (resources or {}).get("current_host") or env.get("SM_CURRENT_HOST")
        if hosts is None:
            hosts = [current] if current else ["localhost"]
        if not isinstance(hosts, list) or not all(isinstance(h, str) for h in hosts):
            raise ConfigError(f"SageMaker hosts must be a list of names, got {hosts!r}")
        self.hosts: list[str] = sorted(set(hosts))
        self.current_host: str = current or self.hosts[0]
        if self.current_host not in self.hosts:
            raise ConfigError(
                f"SageMaker current host {self.current_host!r} is not in hosts {self.hosts} "
                f"(from {self.config_dir}/resourceconfig.json or $SM_HOSTS/$SM_CURRENT_HOST)"
            )
        self.host_rank = self.hosts.index(self.current_host)
        self.num_hosts = len(self.hosts)

    @property
    def channel_names(self) -> list[str]:
        """Channels named by ``inputdataconfig.json`` and ``$SM_CHANNELS``, sorted."""
        names = set(self.input_data_config)
        listed = _env_json(self.environ, "SM_CHANNELS")
        if isinstance(listed, list):
            names.update(str(n) for n in listed)
        return sorted(names)

    @property
    def model_dir(self) -> str:
        """Where the model should be saved (``$SM_MODEL_DIR`` or ``<root>/model``)."""
        return self.environ.get("SM_MODEL_DIR") or os.path.join(self.root, "model")

    @property
    def output_data_dir(self) -> str:
        """Other artifacts (``$SM_OUTPUT_DATA_DIR`` or ``<root>/output/data``)."""
        return self.environ.get("SM_OUTPUT_DATA_DIR") or os.path.join(self.root, "output", "data")

    def channel(self, name: str, *, mode: str | None = None) -> ChannelConfig:
        """Return the configuration of channel ``name``.

        The directory is ``$SM_CHANNEL_<NAME>`` when set, else ``<root>/input/data/<name>``.
        The mode comes from ``inputdataconfig.json``; a channel missing there is File mode when
        its directory exists and Pipe mode when its FIFO ``<name>_0`` exists.

        Args:
            name: the channel name.
            mode: force ``"File"``, ``"FastFile"`` or ``"Pipe"``.

        Raises:
            ConfigError: unknown channel (the message lists the known ones), or a mode or
                distribution type this module does not know.
        """
        entry = self.input_data_config.get(name)
        if entry is not None and not isinstance(entry, dict):
            raise ConfigError(f"inputdataconfig entry for channel {name!r} is not an object")
        entry = entry or {}
        path = self.environ.get(f"SM_CHANNEL_{name.upper()}") or os.path.join(self.data_dir, name)
        if mode is None:
            mode = entry.get("TrainingInputMode")
        if mode is None:
            if os.path.isdir(path):
                mode = "File"
            elif os.path.exists(f"{path}_0"):
                mode = "Pipe"
            else:
                raise ConfigError(
                    f"SageMaker channel {name!r} not found: not in {self.config_dir}/"
                    f"inputdataconfig.json, no directory {path} and no FIFO {path}_0 "
                    f"(known channels: {self.channel_names})"
                )
        if mode not in INPUT_MODES:
            raise ConfigError(
                f"channel {name!r}: TrainingInputMode {mode!r} is not one of {INPUT_MODES}"
            )
        distribution = entry.get("S3DistributionType") or "FullyReplicated"
        if distribution not in DISTRIBUTIONS:
            raise ConfigError(
                f"channel {name!r}: S3DistributionType {distribution!r} is not one of "
                f"{DISTRIBUTIONS}"
            )
        record_wrapper = entry.get("RecordWrapperType")
        if mode == "Pipe" and record_wrapper not in (None, "None"):
            raise ConfigError(
                f"channel {name!r}: RecordWrapperType {record_wrapper!r} wraps every object in "
                "RecordIO; tar shards need RecordWrapperType 'None'"
            )
        return ChannelConfig(
            name=name,
            path=path,
            mode=mode,
            distribution=distribution,
            content_type=entry.get("ContentType"),
            record_wrapper=record_wrapper,
            compression=entry.get("CompressionType"),
        )

    def hyperparameters(self) -> dict[str, Any]:
        """``hyperparameters.json`` with each value JSON-decoded when it parses (as the toolkit).

        SageMaker stores every value as a string; ``"3"`` becomes ``3``, ``"abc"`` stays.
        """
        raw = _read_json(os.path.join(self.config_dir, "hyperparameters.json")) or {}
        result: dict[str, Any] = {}
        for key, value in raw.items():
            try:
                result[key] = json.loads(value) if isinstance(value, str) else value
            except ValueError:
                result[key] = value
        return result

    def __repr__(self) -> str:
        return (
            f"SageMakerEnv(root={self.root!r}, host={self.current_host!r} "
            f"({self.host_rank}/{self.num_hosts}), channels={self.channel_names})"
        )
