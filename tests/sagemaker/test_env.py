"""SageMakerEnv: channels, input modes, hosts and rank from a fake /opt/ml tree and SM_* env."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from wds_cloud.errors import ConfigError
from wds_cloud.sagemaker import SageMakerEnv

from .conftest import FakeOptML


@pytest.mark.parametrize("mode", ["File", "FastFile", "Pipe"])
def test_channel_mode_and_distribution_from_inputdataconfig(optml: FakeOptML, mode: str) -> None:
    optml.add_channel("train", mode, "ShardedByS3Key")
    optml.add_channel("test", "File")
    optml.write_config()
    env = SageMakerEnv(root=str(optml.root), environ={})
    ch = env.channel("train")
    assert (ch.mode, ch.distribution) == (mode, "ShardedByS3Key")
    assert ch.content_type == "application/x-tar"
    assert ch.record_wrapper == "None"
    assert ch.path == str(optml.data / "train")
    assert ch.is_pipe is (mode == "Pipe")
    assert ch.fifo_path(3) == str(optml.data / "train_3")
    assert env.channel_names == ["test", "train"]
    assert env.channel("test").distribution == "FullyReplicated"


def test_root_from_env_variables(optml: FakeOptML) -> None:
    optml.add_channel("train")
    optml.write_config()
    assert SageMakerEnv(environ={"WDS_CLOUD_SM_ROOT": str(optml.root)}).root == str(optml.root)
    assert SageMakerEnv(environ={"SAGEMAKER_BASE_DIR": str(optml.root)}).root == str(optml.root)
    both = {"WDS_CLOUD_SM_ROOT": str(optml.root), "SAGEMAKER_BASE_DIR": "/nonexistent"}
    assert SageMakerEnv(environ=both).channel("train").mode == "File"
    assert SageMakerEnv(environ={}).root == "/opt/ml"


def test_hosts_sorted_lexicographically_and_rank(optml: FakeOptML) -> None:
    optml.write_config(hosts=["algo-3", "algo-1", "algo-2"], current="algo-3")
    env = SageMakerEnv(root=str(optml.root), environ={})
    assert env.hosts == ["algo-1", "algo-2", "algo-3"]
    assert (env.current_host, env.host_rank, env.num_hosts) == ("algo-3", 2, 3)


def test_hosts_from_sm_env_when_no_resourceconfig(optml: FakeOptML) -> None:
    environ = {"SM_HOSTS": json.dumps(["algo-2", "algo-1"]), "SM_CURRENT_HOST": "algo-2"}
    env = SageMakerEnv(root=str(optml.root), environ=environ)
    assert (env.host_rank, env.num_hosts) == (1, 2)


def test_single_host_default(optml: FakeOptML) -> None:
    env = SageMakerEnv(root=str(optml.root), environ={})
    assert (env.host_rank, env.num_hosts) == (0, 1)


def test_current_host_not_in_hosts_is_an_error(optml: FakeOptML) -> None:
    optml.write_config(hosts=["algo-1", "algo-2"], current="algo-9")
    with pytest.raises(ConfigError, match="algo-9"):
        SageMakerEnv(root=str(optml.root), environ={})


def test_sm_channel_variables_and_sm_input_data_config(tmp_path: Path) -> None:
    elsewhere = tmp_path / "mounted"
    elsewhere.mkdir()
    environ = {
        "SM_CHANNELS": json.dumps(["train", "val"]),
        "SM_CHANNEL_TRAIN": str(elsewhere),
        "SM_INPUT_DATA_CONFIG": json.dumps({"train": {"TrainingInputMode": "FastFile"}}),
    }
    env = SageMakerEnv(root=str(tmp_path / "none"), environ=environ)
    assert env.channel_names == ["train", "val"]
    ch = env.channel("train")
    assert (ch.path, ch.mode) == (str(elsewhere), "FastFile")


def test_mode_inferred_without_config(optml: FakeOptML) -> None:
    (optml.data / "files").mkdir(parents=True)
    os.mkfifo(optml.data / "piped_0")
    env = SageMakerEnv(root=str(optml.root), environ={})
    assert env.channel("files").mode == "File"
    assert env.channel("piped").mode == "Pipe"
    assert env.channel("files", mode="Pipe").mode == "Pipe"
    with pytest.raises(ConfigError, match=r"'nothing' not found.*input/data/nothing"):
        env.channel("nothing")


def test_bad_values_are_named(optml: FakeOptML) -> None:
    optml.add_channel("train", "Streaming")
    optml.channels["rec"] = {"TrainingInputMode": "Pipe", "RecordWrapperType": "RecordIO"}
    optml.channels["dist"] = {"TrainingInputMode": "File", "S3DistributionType": "Random"}
    optml.write_config()
    env = SageMakerEnv(root=str(optml.root), environ={})
    with pytest.raises(ConfigError, match="Streaming"):
        env.channel("train")
    with pytest.raises(ConfigError, match="RecordIO"):
        env.channel("rec")
    with pytest.raises(ConfigError, match="Random"):
        env.channel("dist")
    (optml.root / "input" / "config" / "inputdataconfig.json").write_text("{not json")
    with pytest.raises(ConfigError, match=r"inputdataconfig\.json"):
        SageMakerEnv(root=str(optml.root), environ={})
    with pytest.raises(ConfigError, match="SM_HOSTS"):
        SageMakerEnv(root=str(optml.root / "x"), environ={"SM_HOSTS": "algo-1"})


def test_hyperparameters_and_dirs(optml: FakeOptML) -> None:
    optml.write_config()
    hp = {"epochs": "3", "lr": "0.5", "name": "abc"}
    (optml.root / "input" / "config" / "hyperparameters.json").write_text(json.dumps(hp))
    env = SageMakerEnv(root=str(optml.root), environ={})
    assert env.hyperparameters() == {"epochs": 3, "lr": 0.5, "name": "abc"}
    assert env.model_dir == str(optml.root / "model")
    assert SageMakerEnv(root=str(optml.root), environ={"SM_MODEL_DIR": "/m"}).model_dir == "/m"
