"""torch_video and torch_audio: real clips and sounds encoded by FFmpeg, decoded by PyAV.

They return what webdataset's versions return (``torchvision.io.read_video`` and
``torchaudio.load`` results); without PyAV or torch they raise MissingDependencyError naming
the extra (checked in a fresh interpreter where the import fails).
"""

from __future__ import annotations

import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import wds_cloud as wds
from tests.support.media import audio_bytes, pcm16, video_bytes
from wds_cloud.core import decode as decode_module
from wds_cloud.core.avdecode import AUDIO_EXTENSIONS, VIDEO_EXTENSIONS, torch_audio, torch_video
from wds_cloud.core.decode import Decoder, DecodingError


@pytest.mark.parametrize(
    ("ext", "container", "codec", "pix_fmt"),
    [
        ("mp4", "mp4", "mpeg4", "yuv420p"),
        ("avi", "avi", "mjpeg", "yuvj420p"),
        ("webm", "webm", "libvpx", "yuv420p"),
        ("mov", "mov", "mpeg4", "yuv420p"),
    ],
)
def test_video_frames_as_read_video_returns_them(
    ext: str, container: str, codec: str, pix_fmt: str
) -> None:
    data = video_bytes(container, codec, pix_fmt=pix_fmt)
    frames, audio, info = torch_video(f".{ext}", data)
    assert frames.dtype == torch.uint8 and tuple(frames.shape) == (5, 24, 32, 3)
    levels = frames.float().mean(dim=(1, 2, 3)).numpy()
    assert np.allclose(levels, [0, 40, 80, 120, 160], atol=4), levels  # lossy, in order
    assert audio.dtype == torch.float32 and tuple(audio.shape) == (1, 0)
    assert info == {"video_fps": 10.0}


def test_video_with_sound() -> None:
    data = video_bytes("mp4", "mpeg4", audio_codec="aac")
    frames, audio, info = torch_video(".mp4", data)
    assert tuple(frames.shape) == (5, 24, 32, 3)
    # AAC decodes to planar float: one row per channel, frames concatenated along samples
    assert audio.dtype == torch.float32 and audio.shape[0] == 1 and audio.shape[1] >= 4000
    assert 0.3 < float(audio.abs().max()) < 0.7
    assert info == {"video_fps": 10.0, "audio_fps": 8000}


def test_sound_only_file_gives_empty_video() -> None:
    frames, audio, info = torch_video(".mp4", audio_bytes("mp4", "aac", pcm16()))
    assert frames.dtype == torch.uint8 and tuple(frames.shape) == (0, 1, 1, 3)
    assert audio.shape[0] == 2 and info == {"audio_fps": 8000}


def test_wav_is_scaled_exactly_like_torchaudio() -> None:
    signal = pcm16()
    wave, rate = torch_audio(".wav", audio_bytes("wav", "pcm_s16le", signal))
    assert rate == 8000 and wave.dtype == torch.float32 and tuple(wave.shape) == (2, 4000)
    assert np.array_equal(wave.numpy(), signal.astype(np.float32) / 32768)


@pytest.mark.parametrize(
    ("ext", "container", "codec", "lossless"),
    [
        ("flac", "flac", "flac", True),
        ("sox", "sox", "pcm_s32le", True),
        ("mp3", "mp3", "libmp3lame", False),
        ("m4a", "ipod", "aac", False),
    ],
)
def test_audio_formats(ext: str, container: str, codec: str, lossless: bool) -> None:
    signal = pcm16()
    wave, rate = torch_audio(f".{ext}", audio_bytes(container, codec, signal))
    assert rate == 8000 and wave.dtype == torch.float32 and wave.shape[0] == 2
    if lossless:
        assert np.array_equal(wave.numpy(), signal.astype(np.float32) / 32768)
    else:
        assert wave.shape[1] >= 4000 and 0.3 < float(wave.abs().max()) < 0.7


def test_other_keys_are_not_handled() -> None:
    assert torch_video(".wav", b"x") is None and torch_audio(".mp4", b"x") is None
    assert torch_video(".txt", b"x") is None
    assert set(VIDEO_EXTENSIONS) == {
        "mp4",
        "ogv",
        "mjpeg",
        "avi",
        "mov",
        "h264",
        "mpg",
        "webm",
        "wmv",
    }
    assert set(AUDIO_EXTENSIONS) == {"flac", "mp3", "sox", "wav", "m4a", "ogg", "wma"}


def test_undecodable_value_is_a_decoding_error() -> None:
    with pytest.raises(DecodingError, match="'mp4'"):
        Decoder([torch_video])({"__key__": "k", "mp4": b"not a video at all"})


def test_in_a_pipeline_and_through_the_webdataset_names(tmp_path: Path) -> None:
    shard = tmp_path / "av.tar"
    signal = pcm16()
    with wds.TarWriter(str(shard)) as writer:
        writer.write(
            {
                "__key__": "clip",
                "mp4": video_bytes("mp4", "mpeg4"),
                "wav": audio_bytes("wav", "pcm_s16le", signal),
            }
        )
    autodecode = wds.webdataset_module("autodecode")
    assert autodecode.torch_video is torch_video and decode_module.torch_audio is torch_audio
    assert wds.torch_video is torch_video and wds.torch_audio is torch_audio
    ds = wds.WebDataset(str(shard), shardshuffle=False).decode(wds.torch_video, wds.torch_audio)
    [sample] = list(ds)
    frames, _, info = sample["mp4"]
    wave, rate = sample["wav"]
    assert tuple(frames.shape) == (5, 24, 32, 3) and info["video_fps"] == 10.0
    assert rate == 8000 and tuple(wave.shape) == (2, 4000)


def test_handlers_pickle_to_the_same_objects() -> None:
    assert pickle.loads(pickle.dumps(torch_video)) is torch_video
    assert pickle.loads(pickle.dumps(torch_audio)) is torch_audio


@pytest.mark.parametrize(
    ("hidden", "handler", "extra"),
    [
        ("av", "torch_video", "video"),
        ("av", "torch_audio", "audio"),
        ("torch", "torch_video", "torch"),
    ],
)
def test_missing_package_names_the_extra(hidden: str, handler: str, extra: str) -> None:
    # A fresh interpreter in which importing `hidden` fails, as when it is not installed.
    code = (
        "import sys\n"
        f"sys.modules[{hidden!r}] = None\n"
        "from wds_cloud.core.decode import " + handler + " as handler\n"
        "from wds_cloud.errors import MissingDependencyError\n"
        "key = '.mp4' if handler.name == 'torch_video' else '.wav'\n"
        "try:\n"
        "    handler(key, b'data')\n"
        "except MissingDependencyError as exc:\n"
        "    print(exc.extra, '|', exc)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    got_extra, _, message = out.stdout.strip().partition(" | ")
    assert got_extra == extra
    assert f"pip install 'wds_cloud[{extra}]'" in message
