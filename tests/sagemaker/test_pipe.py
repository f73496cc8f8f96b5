"""Pipe mode against a real writer process feeding per-epoch FIFOs."""

from __future__ import annotations

import collections
import os
import threading
from pathlib import Path

import pytest

from wds_cloud.errors import ConfigError, ShardNotFoundError, ShardOpenError, ShardReadError
from wds_cloud.sagemaker import SageMakerEnv, channel_shards, open_fifo, sagemaker_dataset

from .conftest import FakeOptML, PipeWriter, sample_keys, write_shards
from .pipe_writer import EXIT_EPIPE


def _pipe_env(
    optml: FakeOptML, distribution: str = "FullyReplicated", **hosts: object
) -> SageMakerEnv:
    optml.add_channel("train", "Pipe", distribution)
    optml.write_config(**hosts)  # type: ignore[arg-type]
    return SageMakerEnv(root=str(optml.root), environ={})


def test_two_epochs_every_sample_of_every_shard_exactly_once(
    optml: FakeOptML, tmp_path: Path, pipe_writer: type[PipeWriter]
) -> None:
    env = _pipe_env(optml)
    shards = write_shards(tmp_path / "src", 5, 7)
    writer = pipe_writer(optml.data, "train", 2, shards)
    ds = sagemaker_dataset("train", env=env, open_timeout=30)
    for epoch in range(2):
        counts = collections.Counter(s["__key__"] for s in ds)
        assert sorted(counts) == sample_keys(5, 7), f"epoch {epoch}"
        assert set(counts.values()) == {1}
    size = sum(p.stat().st_size for p in shards)
    assert writer.wait() == (0, f"done epoch=0 written={size}\ndone epoch=1 written={size}\n")


def test_samples_carry_fifo_url_and_bytes(
    optml: FakeOptML, tmp_path: Path, pipe_writer: type[PipeWriter]
) -> None:
    env = _pipe_env(optml)
    shards = write_shards(tmp_path / "src", 2, 2, payload=10)
    pipe_writer(optml.data, "train", 1, shards)
    first = next(iter(sagemaker_dataset("train", env=env, open_timeout=30)))
    assert first["__url__"] == str(optml.data / "train_0")
    assert first["input.bin"] == bytes([0]) * 10
    assert first["cls"] == b"0"


def test_gzip_shards_back_to_back(
    optml: FakeOptML, tmp_path: Path, pipe_writer: type[PipeWriter]
) -> None:
    import gzip

    env = _pipe_env(optml)
    shards = write_shards(tmp_path / "src", 3, 4)
    gz = []
    for p in shards:
        q = p.with_suffix(".tar.gz")
        q.write_bytes(gzip.compress(p.read_bytes(), mtime=0))
        gz.append(q)
    pipe_writer(optml.data, "train", 1, gz)
    keys = [s["__key__"] for s in sagemaker_dataset("train", env=env, open_timeout=30)]
    assert keys == sample_keys(3, 4)


def test_set_epoch_selects_the_fifo(
    optml: FakeOptML, tmp_path: Path, pipe_writer: type[PipeWriter]
) -> None:
    env = _pipe_env(optml)
    shards = write_shards(tmp_path / "src", 1, 3)
    writer = pipe_writer(optml.data, "train", 2, shards)
    ds = sagemaker_dataset("train", env=env, open_timeout=30)
    assert len(list(ds)) == 3  # epoch 0
    ds.set_epoch(1)
    assert len(list(ds)) == 3
    assert writer.wait()[0] == 0
    # the writer made no epoch 2: the next iter() fails, bounded, naming the FIFO
    ds2 = sagemaker_dataset("train", env=env, epoch=2, open_timeout=0.5)
    with pytest.raises(ShardNotFoundError, match="train_2"):
        list(ds2)


def test_early_stop_releases_the_writer_with_epipe(
    optml: FakeOptML, tmp_path: Path, pipe_writer: type[PipeWriter]
) -> None:
    env = _pipe_env(optml)
    # ~16 MiB per epoch: far more than the pipe buffer and the reader's 4 MiB read-ahead.
    shards = write_shards(tmp_path / "src", 4, 64, payload=64 << 10)
    writer = pipe_writer(optml.data, "train", 1, shards)
    it = iter(sagemaker_dataset("train", env=env, open_timeout=30))
    taken = [next(it)["__key__"] for _ in range(3)]
    assert taken == sample_keys(4, 64)[:3]
    it.close()  # type: ignore[attr-defined]
    code, out = writer.wait(timeout=60)  # bounded: a blocked writer would time out here
    assert code == EXIT_EPIPE, out
    assert out.startswith("EPIPE epoch=0")


def test_missing_fifo_is_a_bounded_clear_error(optml: FakeOptML) -> None:
    env = _pipe_env(optml)
    ds = sagemaker_dataset("train", env=env, open_timeout=0.3)
    with pytest.raises(ShardNotFoundError, match=r"FIFO .*input/data/train_0 did not appear"):
        list(ds)


def test_fifo_without_writer_is_a_bounded_clear_error(optml: FakeOptML) -> None:
    env = _pipe_env(optml)
    os.mkfifo(optml.data / "train_0")
    with pytest.raises(ShardOpenError, match=r"no writer opened .*input/data/train_0"):
        list(sagemaker_dataset("train", env=env, open_timeout=0.3))


def test_open_timeout_from_environment(optml: FakeOptML) -> None:
    optml.add_channel("train", "Pipe")
    optml.write_config()
    os.mkfifo(optml.data / "train_0")
    env = SageMakerEnv(root=str(optml.root), environ={"WDS_CLOUD_SM_PIPE_TIMEOUT": "0.2"})
    with pytest.raises(ShardOpenError, match=r"within 0\.2 s"):
        list(sagemaker_dataset("train", env=env))


def test_stalled_writer_hits_read_timeout(tmp_path: Path) -> None:
    path = tmp_path / "train_0"
    os.mkfifo(path)
    fd_holder: list[int] = []
    ready = threading.Event()

    def writer() -> None:
        fd_holder.append(os.open(path, os.O_WRONLY))
        os.write(fd_holder[0], b"x" * 10)
        ready.set()

    t = threading.Thread(target=writer)
    t.start()
    stream = open_fifo(str(path), timeout=10, read_timeout=0.2)
    t.join()
    ready.wait()
    try:
        assert stream.read(10) == b"x" * 10
        with pytest.raises(OSError, match=r"no data for 0\.2 s.*offset=10"):
            stream.read(10)
    finally:
        stream.close()
        os.close(fd_holder[0])


def test_regular_file_stands_in_for_the_fifo(optml: FakeOptML, tmp_path: Path) -> None:
    env = _pipe_env(optml)
    shards = write_shards(tmp_path / "src", 3, 2)
    (optml.data / "train_0").write_bytes(b"".join(p.read_bytes() for p in shards))
    assert [s["__key__"] for s in sagemaker_dataset("train", env=env)] == sample_keys(3, 2)


def test_fullyreplicated_pipe_on_two_hosts_splits_samples(optml: FakeOptML, tmp_path: Path) -> None:
    shards = write_shards(tmp_path / "src", 3, 5)
    optml.add_channel("train", "Pipe")
    (optml.data / "train_0").write_bytes(b"".join(p.read_bytes() for p in shards))
    seen = []
    for host in ("algo-1", "algo-2"):
        optml.write_config(hosts=["algo-1", "algo-2"], current=host)
        env = SageMakerEnv(root=str(optml.root), environ={})
        seen.append([s["__key__"] for s in sagemaker_dataset("train", env=env)])
    assert not set(seen[0]) & set(seen[1])
    assert sorted(seen[0] + seen[1]) == sample_keys(3, 5)
    # ShardedByS3Key: each host's FIFO already holds its own data
    optml.add_channel("train", "Pipe", "ShardedByS3Key")
    optml.write_config(hosts=["algo-1", "algo-2"], current="algo-2")
    env = SageMakerEnv(root=str(optml.root), environ={})
    assert len(list(sagemaker_dataset("train", env=env))) == 15


def test_pipe_rejects_what_it_cannot_honour(optml: FakeOptML) -> None:
    env = _pipe_env(optml)
    with pytest.raises(ConfigError, match="resampled"):
        sagemaker_dataset("train", env=env, resampled=True)
    env2 = SageMakerEnv(root=str(optml.root), environ={"LOCAL_WORLD_SIZE": "2", "LOCAL_RANK": "0"})
    with pytest.raises(ConfigError, match="LOCAL_WORLD_SIZE=2"):
        channel_shards("train", env=env2)
    with pytest.raises(ConfigError, match="Pipe mode"):
        list(channel_shards("train", env=env))


def test_dataloader_more_than_one_worker_is_refused(optml: FakeOptML, tmp_path: Path) -> None:
    torch_data = pytest.importorskip("torch.utils.data")
    env = _pipe_env(optml)
    shards = write_shards(tmp_path / "src", 2, 2)
    (optml.data / "train_0").write_bytes(b"".join(p.read_bytes() for p in shards))
    ds = sagemaker_dataset("train", env=env, open_timeout=5)
    loader = torch_data.DataLoader(ds, batch_size=None, num_workers=2)
    with pytest.raises(ConfigError, match=r"only one reader.*2 workers"):
        list(loader)
    one = torch_data.DataLoader(ds, batch_size=None, num_workers=1)
    assert sorted(s["__key__"] for s in one) == sample_keys(2, 2)


def test_corrupt_stream_names_fifo_and_offset(
    optml: FakeOptML, tmp_path: Path, pipe_writer: type[PipeWriter]
) -> None:
    env = _pipe_env(optml)
    good = write_shards(tmp_path / "src", 1, 2)[0]
    bad = tmp_path / "bad.tar"
    bad.write_bytes(b"\x01" * 1024)  # not a tar header
    pipe_writer(optml.data, "train", 1, [good, bad])
    it = iter(sagemaker_dataset("train", env=env, open_timeout=30))
    assert next(it)["__key__"] == sample_keys(1, 2)[0]
    # the last sample of the good shard is still being assembled when the bad header comes
    with pytest.raises(ShardReadError, match="corrupt tar header") as info:
        next(it)
    assert info.value.url == str(optml.data / "train_0")
    assert info.value.offset == good.stat().st_size
