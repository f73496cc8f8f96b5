"""Small real video and audio files, encoded in memory with PyAV (FFmpeg), for decoder tests."""

from __future__ import annotations

import io

import av
import numpy as np


def video_bytes(
    container: str,
    codec: str,
    *,
    frames: int = 5,
    width: int = 32,
    height: int = 24,
    fps: int = 10,
    pix_fmt: str = "yuv420p",
    audio_codec: str | None = None,
) -> bytes:
    """A ``frames``-frame clip whose frame ``i`` is a flat gray of level ``40 * i``.

    With ``audio_codec``, half a second of a mono 440 Hz tone at 8 kHz is muxed in too.
    """
    buf = io.BytesIO()
    with av.open(buf, "w", format=container) as out:
        stream = out.add_stream(codec, rate=fps)
        stream.width, stream.height, stream.pix_fmt = width, height, pix_fmt
        sound = None
        if audio_codec is not None:
            sound = out.add_stream(audio_codec, rate=8000)
            sound.layout = "mono"
        for i in range(frames):
            picture = np.full((height, width, 3), 40 * i, np.uint8)
            out.mux(stream.encode(av.VideoFrame.from_ndarray(picture, format="rgb24")))
        out.mux(stream.encode())
        if sound is not None:
            tone = 0.5 * np.sin(2 * np.pi * 440 * np.arange(4000) / 8000)
            frame = av.AudioFrame.from_ndarray(
                tone.astype(np.float32)[None, :], format="fltp", layout="mono"
            )
            frame.sample_rate, frame.pts = 8000, 0
            out.mux(sound.encode(frame))
            out.mux(sound.encode())
    return buf.getvalue()


def pcm16(samples: int = 4000, rate: int = 8000) -> np.ndarray:
    """A stereo int16 signal ``[2, samples]``: 440 Hz left, 220 Hz right, at half scale."""
    t = np.arange(samples) / rate
    wave = 0.5 * np.stack([np.sin(2 * np.pi * 440 * t), np.sin(2 * np.pi * 220 * t)])
    return (wave * 32767).astype(np.int16)


def audio_bytes(container: str, codec: str, signal: np.ndarray, rate: int = 8000) -> bytes:
    """``signal`` (int16 ``[2, samples]``) encoded as stereo ``codec`` in ``container``."""
    buf = io.BytesIO()
    with av.open(buf, "w", format=container) as out:
        stream = out.add_stream(codec, rate=rate)
        stream.layout = "stereo"
        if codec.startswith("pcm_") or codec == "flac":
            data, fmt = np.ascontiguousarray(signal.T).reshape(1, -1), "s16"
        else:
            data, fmt = (signal / 32768.0).astype(np.float32), "fltp"
        frame = av.AudioFrame.from_ndarray(data, format=fmt, layout="stereo")
        frame.sample_rate, frame.pts = rate, 0
        out.mux(stream.encode(frame))
        out.mux(stream.encode())
    return buf.getvalue()
