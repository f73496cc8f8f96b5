"""Video and audio decoders: webdataset's ``torch_video`` and ``torch_audio``, on PyAV.

webdataset 1.0.2 decodes video with ``torchvision.io.read_video(path, pts_unit="sec")`` and
audio with ``torchaudio.load(path)``, after writing each value to a temporary file. Both
libraries need a matching torch build and FFmpeg; torchvision's ``read_video`` itself is PyAV
underneath, and torchaudio's default backend is FFmpeg. Here both decoders call PyAV (FFmpeg's
Python binding, ``pip install 'wds_cloud[video]'`` or ``[audio]``) directly on the bytes in
memory, and return what those functions return:

- :data:`torch_video` -> ``(video, audio, info)``: ``video`` a uint8 tensor ``[T, H, W, 3]``
  (RGB; ``[0, 1, 1, 3]`` without a video stream), ``audio`` a tensor ``[K, L]`` holding the
  audio frames as the codec gives them, concatenated along the second axis (``[1, 0]`` float32
  without an audio stream), ``info`` a dict with ``video_fps`` (float) and ``audio_fps`` (the
  sample rate) for the streams present. Frames with a negative timestamp are dropped and
  frames are ordered by timestamp, as ``read_video`` does.
- :data:`torch_audio` -> ``(waveform, sample_rate)``: ``waveform`` a float32 tensor
  ``[channels, samples]`` scaled to [-1, 1] (integer PCM divided by 2**(bits-1), as FFmpeg and
  torchaudio do), ``sample_rate`` an int.

Both are handlers ``f(key, data)`` that return None for keys they do not handle (the last
extension, compared without regard to case, must be one of :data:`VIDEO_EXTENSIONS` or
:data:`AUDIO_EXTENSIONS`), so ``wds.decode(wds.torch_video)`` works as in webdataset. One
deliberate difference: a value FFmpeg cannot decode raises (``read_video`` returns empty tensors
for it), so a :class:`~wds_cloud.core.decode.Decoder` reports it as a
:class:`~wds_cloud.core.decode.DecodingError` instead of handing on an empty clip.

Raises :class:`~wds_cloud.errors.MissingDependencyError` naming the extra when PyAV (``video``
or ``audio``) or torch (``torch``) is missing; neither is imported before the first value.
"""

from __future__ import annotations

import io
from typing import Any

import numpy as np

from wds_cloud.core.decodehandlers import KeyedHandler
from wds_cloud.core.loads import Decode
from wds_cloud.errors import MissingDependencyError

__all__ = ["AUDIO_EXTENSIONS", "VIDEO_EXTENSIONS", "torch_audio", "torch_video"]

VIDEO_EXTENSIONS = ("mp4", "ogv", "mjpeg", "avi", "mov", "h264", "mpg", "webm", "wmv")
"""Extensions :data:`torch_video` decodes (webdataset's list)."""
AUDIO_EXTENSIONS = ("flac", "mp3", "sox", "wav", "m4a", "ogg", "wma")
"""Extensions :data:`torch_audio` decodes (webdataset's list)."""


def _av(extra: str) -> Any:
    try:
        import av
    except ImportError as exc:
        raise MissingDependencyError(f"decoding {extra} needs PyAV (av)", extra=extra) from exc
    return av


def _torch(what: str) -> Any:
    try:
        import torch
    except ImportError as exc:
        raise MissingDependencyError(f"{what} returns torch tensors", extra="torch") from exc
    return torch


def _open(av: Any, data: bytes) -> Any:
    return av.open(io.BytesIO(data), mode="r", metadata_errors="ignore")


def _in_order(frames: list[Any]) -> list[Any]:
    """Frames with a timestamp >= 0, one per timestamp, sorted (``read_video``'s selection)."""
    if any(f.pts is None for f in frames):
        return frames  # a raw stream without timestamps: decoding order
    by_pts = {f.pts: f for f in frames if f.pts >= 0}
    return [by_pts[pts] for pts in sorted(by_pts)]


def decode_video(data: bytes) -> tuple[Any, Any, dict[str, Any]]:
    """Decode a whole video file held in ``data``; see the module docstring for the result.

    Raises:
        MissingDependencyError: PyAV or torch is not installed.
        av.FFmpegError: FFmpeg cannot read the data (a ``ValueError`` or ``OSError``).
    """
    av = _av("video")
    torch = _torch("torch_video")
    info: dict[str, Any] = {}
    with _open(av, data) as container:
        video = container.streams.video[0] if container.streams.video else None
        audio = container.streams.audio[0] if container.streams.audio else None
        streams = [s for s in (video, audio) if s is not None]
        vframes: list[Any] = []
        aframes: list[Any] = []
        if streams:
            for packet in container.demux(*streams):
                target = vframes if packet.stream is video else aframes
                target.extend(packet.decode())
        if video is not None and video.average_rate is not None:
            info["video_fps"] = float(video.average_rate)
        if audio is not None:
            info["audio_fps"] = audio.rate
    pictures = [f.to_ndarray(format="rgb24") for f in _in_order(vframes)]
    if pictures:
        frames = torch.as_tensor(np.stack(pictures))
    else:
        frames = torch.empty((0, 1, 1, 3), dtype=torch.uint8)
    sound = [f.to_ndarray() for f in _in_order(aframes)]
    if sound:
        waves = torch.as_tensor(np.concatenate(sound, axis=1))
    else:
        waves = torch.empty((1, 0), dtype=torch.float32)
    return frames, waves, info


def decode_audio(data: bytes) -> tuple[Any, int]:
    """Decode the first audio stream of ``data`` to ``(float32 [channels, samples], rate)``.

    Raises:
        MissingDependencyError: PyAV or torch is not installed.
        ValueError: the data holds no audio stream.
        av.FFmpegError: FFmpeg cannot read the data (a ``ValueError`` or ``OSError``).
    """
    av = _av("audio")
    torch = _torch("torch_audio")
    with _open(av, data) as container:
        if not container.streams.audio:
            raise ValueError("no audio stream in the data")
        stream = container.streams.audio[0]
        # planar float: [channels, samples] per frame, integer PCM scaled by FFmpeg's swresample
        resampler = av.AudioResampler(format="fltp")
        chunks: list[np.ndarray] = []
        for frame in container.decode(stream):
            chunks.extend(f.to_ndarray() for f in resampler.resample(frame))
        chunks.extend(f.to_ndarray() for f in resampler.resample(None))
        rate = int(stream.rate)
        channels = stream.channels
    if chunks:
        wave = np.concatenate(chunks, axis=1)
    else:
        wave = np.zeros((channels, 0), dtype=np.float32)
    return torch.from_numpy(np.ascontiguousarray(wave, dtype=np.float32)), rate


class _AvHandler(KeyedHandler):
    """Applies ``fn`` to values whose last extension is in ``extensions``."""

    def __init__(self, name: str, extensions: tuple[str, ...], fn: Decode) -> None:
        self.name = name
        self.extensions = frozenset(extensions)
        self.fn = fn

    def resolve(self, key: str) -> Decode | None:
        """Return the decoder when the key's last extension is one of ``extensions``."""
        return self.fn if key.rpartition(".")[2].lower() in self.extensions else None

    def __reduce__(self) -> tuple[Any, ...]:
        return (_builtin, (self.name,))

    def __repr__(self) -> str:
        return f"<wds_cloud {self.name} handler>"


def _builtin(name: str) -> _AvHandler:
    return torch_video if name == "torch_video" else torch_audio


torch_video = _AvHandler("torch_video", VIDEO_EXTENSIONS, decode_video)
"""Handler ``f(key, data)``: decode video values (see the module docstring)."""
torch_audio = _AvHandler("torch_audio", AUDIO_EXTENSIONS, decode_audio)
"""Handler ``f(key, data)``: decode audio values (see the module docstring)."""
