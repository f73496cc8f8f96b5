"""Deterministic benchmark shards for ``bench_core.py``, cached under ``bench_data/``.

Six regimes (docs/benchmarks.md describes them):

* ``tiny``: ``.txt`` (90-110 B of seeded random text) + ``.cls``; about 2 KB per sample on disk.
* ``small``: ``.jpg`` (64x64 RGB noise + gradient, quality 90, 4:4:4, about 8 KB) + ``.cls`` +
  ``.json``.
* ``large``: ``.image.png`` (1024x1024 RGB noise, 3.15 MB) + ``.label.png`` (1024x1024 L noise,
  1.05 MB): the case of the "Training in PyTorch from Amazon S3" blog post.
* ``jpeg256``: ``.jpg`` (256x256 RGB gradient + noise, quality 90, 4:2:0, about 27 KB) + ``.cls``
  (``bench_decode.py``).
* ``photo256``: ``.jpg`` (256x256 photographic-like RGB, quality 90, 4:2:0, 17-35 KB, mean about
  27 KB) + ``.cls``: muted colour regions, hard-edged shapes, 1/f ("natural image") luminance
  texture, an oriented grating, vignetting and sensor-like noise, each drawn per image, so
  sizes and decode times spread as real photos' do (``bench_loader.py``, ``bench_decode.py``).
* ``pax``: tiny samples written by ``webdataset.TarWriter`` with its default ``mtime=None``, so
  every member carries a PAX extended header (float mtime). Content is seeded; the mtimes are
  wall-clock by design, so these bytes differ between generations.

``tiny``/``small``/``large``/``jpeg256``/``photo256`` are written with the stdlib ``tarfile`` stream writer (members in
sorted extension order, mode 0444, uname/gname ``bigdata``, mtime 1700000000, the layout
``webdataset.TarWriter(mtime=1700000000)`` produces) and are byte-identical across runs.

A data set is stored in ``<root>/<regime>-<hash of its parameters>/`` and reused when its
``manifest.json`` (written last) exists.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import resource
import shutil
import tarfile
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

FORMAT_VERSION = 1
MTIME = 1700000000
SEED = 20240917
REGIMES = ("tiny", "pax", "small", "large", "jpeg256", "photo256")
_REGIME_ID = {name: i for i, name in enumerate(REGIMES)}
_WORDS = np.frombuffer(b"abcdefghijklmnopqrstuvwxyz      ", dtype=np.uint8)


@dataclass(frozen=True)
class DataSpec:
    """Parameters of one generated data set (they key the cache).

    Attributes:
        regime: one of ``REGIMES``.
        shards: number of shard files.
        per_shard: samples per shard.
    """

    regime: str
    shards: int
    per_shard: int

    def key(self) -> str:
        """Directory name: regime plus a hash of all parameters and the format version."""
        blob = json.dumps({**asdict(self), "v": FORMAT_VERSION, "seed": SEED}, sort_keys=True)
        return f"{self.regime}-{hashlib.sha256(blob.encode()).hexdigest()[:10]}"


@dataclass(frozen=True)
class DataSet:
    """A generated data set on disk.

    Attributes:
        spec: the parameters it was made from.
        paths: shard file paths, in order.
        samples: total number of samples.
        nbytes: total shard bytes on disk.
    """

    spec: DataSpec
    paths: tuple[str, ...]
    samples: int
    nbytes: int


def _tiny_sample(rng: np.random.Generator, index: int) -> dict[str, bytes]:
    length = int(rng.integers(90, 111))
    text = _WORDS[rng.integers(0, len(_WORDS), length)].tobytes()
    return {"txt": text, "cls": str(index % 1000).encode()}


def _small_sample(rng: np.random.Generator, index: int) -> dict[str, bytes]:
    from PIL import Image

    grad = np.add.outer(np.arange(64), np.arange(64)).astype(np.int16)[:, :, None] * 2
    noise = rng.integers(0, 96, (64, 64, 3), dtype=np.int16)
    pixels = np.clip(grad + noise, 0, 255).astype(np.uint8)
    buf = io.BytesIO()
    Image.fromarray(pixels, "RGB").save(buf, format="JPEG", quality=90, subsampling=0)
    cls = index % 1000
    meta = {"index": index, "label": cls, "source": "bench", "width": 64, "height": 64}
    return {"jpg": buf.getvalue(), "cls": str(cls).encode(), "json": json.dumps(meta).encode()}


def _large_sample(rng: np.random.Generator, index: int) -> dict[str, bytes]:
    from PIL import Image

    out = {}
    image = rng.integers(0, 256, (1024, 1024, 3), dtype=np.uint8)
    label = rng.integers(0, 256, (1024, 1024), dtype=np.uint8)
    for ext, arr, mode in (("image.png", image, "RGB"), ("label.png", label, "L")):
        buf = io.BytesIO()
        Image.fromarray(arr, mode).save(buf, format="PNG")
        out[ext] = buf.getvalue()
    return out


def _jpeg256_sample(rng: np.random.Generator, index: int) -> dict[str, bytes]:
    from PIL import Image

    y, x = np.mgrid[0:256, 0:256]
    phase = index % 7
    base = np.stack([x, y, (x + y + 32 * phase) // 2], axis=2).astype(np.int16)
    noise = rng.integers(-24, 24, (256, 256, 3), dtype=np.int16)
    pixels = np.clip(base + noise, 0, 255).astype(np.uint8)
    buf = io.BytesIO()
    Image.fromarray(pixels, "RGB").save(buf, format="JPEG", quality=90)  # 4:2:0, PIL's default
    return {"jpg": buf.getvalue(), "cls": str(index % 1000).encode()}


_YX = np.mgrid[0:256, 0:256].astype(np.float32)
_FREQ = np.hypot(np.fft.fftfreq(256)[:, None], np.fft.rfftfreq(256)[None, :]).astype(np.float32)
_FREQ[0, 0] = 1.0


def _photo256_sample(rng: np.random.Generator, index: int) -> dict[str, bytes]:
    from PIL import Image, ImageDraw, ImageFilter

    y, x = _YX
    base = rng.uniform(60, 190, 3)  # one muted palette per scene

    def colour() -> tuple[int, ...]:
        c = np.clip(base + rng.normal(0, 35, 3) + rng.normal(0, 40), 0, 255)
        return tuple(int(v) for v in c)

    g = int(rng.integers(3, 7))  # smooth regions: a coarse colour grid, upsampled
    coarse = np.array([colour() for _ in range(g * g)], dtype=np.uint8).reshape(g, g, 3)
    img = Image.fromarray(coarse, "RGB").resize((256, 256), Image.Resampling.BICUBIC)
    draw = ImageDraw.Draw(img)
    for _ in range(int(rng.integers(2, 7))):  # objects: hard-edged shapes
        x0, y0 = (int(v) for v in rng.integers(-40, 256, 2))
        w, h = (int(v) for v in rng.integers(24, 150, 2))
        shape = draw.ellipse if rng.random() < 0.5 else draw.rectangle
        shape((x0, y0, x0 + w, y0 + h), fill=colour())
    img = img.filter(ImageFilter.GaussianBlur(float(rng.uniform(0.7, 1.5))))  # lens
    pixels = np.asarray(img, dtype=np.float32)
    # texture: luminance noise with a 1/f amplitude spectrum, as photographs have
    spectrum = rng.normal(size=_FREQ.shape) + 1j * rng.normal(size=_FREQ.shape)
    texture = np.fft.irfft2(spectrum / _FREQ ** rng.uniform(0.9, 1.2), s=(256, 256))
    texture *= rng.uniform(8, 32) / texture.std()
    theta, freq = rng.uniform(0, np.pi), rng.uniform(0.1, 0.5)  # a pattern: fabric, bricks
    grating = np.sin(freq * (x * np.cos(theta) + y * np.sin(theta)) + rng.uniform(0, 6.3))
    mask = rng.integers(0, 256, (4, 4), dtype=np.uint8)
    mask_img = Image.fromarray(mask).resize((256, 256), Image.Resampling.BICUBIC)
    weight = (np.asarray(mask_img, dtype=np.float32) / 255) ** 2
    pixels += (texture + 10 * grating * weight)[:, :, None]
    pixels *= (1.0 - 0.3 * ((x - 128) ** 2 + (y - 128) ** 2) / (2 * 128**2))[:, :, None]
    sigma = rng.uniform(2.75, 8.25)  # sensor noise: mostly luminance, some chroma
    pixels += rng.normal(0, sigma, (256, 256, 1)) + rng.normal(0, sigma / 3, (256, 256, 3))
    buf = io.BytesIO()
    image = Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8), "RGB")
    image.save(buf, format="JPEG", quality=90)  # 4:2:0, PIL's default
    return {"jpg": buf.getvalue(), "cls": str(index % 1000).encode()}


_MAKERS = {"tiny": _tiny_sample, "pax": _tiny_sample, "small": _small_sample}
_MAKERS["large"] = _large_sample
_MAKERS["jpeg256"] = _jpeg256_sample
_MAKERS["photo256"] = _photo256_sample


def iter_samples(spec: DataSpec, shard: int) -> Iterator[tuple[str, dict[str, bytes]]]:
    """Yield ``(key, {ext: bytes})`` for one shard, seeded by (seed, regime, shard number).

    Args:
        spec: the data set parameters.
        shard: shard number, ``0 <= shard < spec.shards``.

    Yields:
        The key and the member payloads of each sample, in order.
    """
    rng = np.random.default_rng([SEED, _REGIME_ID[spec.regime], shard])
    make = _MAKERS[spec.regime]
    for j in range(spec.per_shard):
        index = shard * spec.per_shard + j
        yield f"{spec.regime}_{index:08d}", make(rng, index)


def _write_stdlib(path: str, samples: Iterator[tuple[str, dict[str, bytes]]]) -> None:
    with open(path, "wb") as f, tarfile.open(fileobj=f, mode="w|") as tar:
        for key, sample in samples:
            for ext in sorted(sample):
                data = sample[ext]
                info = tarfile.TarInfo(f"{key}.{ext}")
                info.size = len(data)
                info.mtime = MTIME
                info.mode = 0o444
                info.uname = info.gname = "bigdata"
                tar.addfile(info, io.BytesIO(data))


def _write_tarwriter(path: str, samples: Iterator[tuple[str, dict[str, bytes]]]) -> None:
    import webdataset  # imports torch; only needed to make the pax regime

    with open(path, "wb") as f:
        writer = webdataset.TarWriter(f)  # default mtime=None -> PAX header per member
        for key, sample in samples:
            writer.write({"__key__": key, **sample})
        writer.close()


def ensure(spec: DataSpec, root: str, log: Any = None) -> DataSet:
    """Return the data set for ``spec`` under ``root``, generating it if not cached.

    Args:
        spec: the data set parameters.
        root: cache directory (created if missing).
        log: optional ``print``-like callable for progress lines.

    Returns:
        The data set (paths, sample count, bytes).
    """
    if spec.regime not in _MAKERS:
        raise ValueError(f"unknown regime {spec.regime!r}; expected one of {REGIMES}")
    directory = os.path.join(root, spec.key())
    manifest = os.path.join(directory, "manifest.json")
    paths = tuple(os.path.join(directory, f"{spec.regime}-{i:06d}.tar") for i in range(spec.shards))
    if not os.path.exists(manifest):
        if log:
            log(f"generating {spec} in {directory}")
        shutil.rmtree(directory, ignore_errors=True)
        tmp = directory + ".tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        os.makedirs(tmp)
        write = _write_tarwriter if spec.regime == "pax" else _write_stdlib
        for i, path in enumerate(paths):
            write(os.path.join(tmp, os.path.basename(path)), iter_samples(spec, i))
        with open(os.path.join(tmp, "manifest.json"), "w") as f:
            json.dump({**asdict(spec), "v": FORMAT_VERSION, "seed": SEED}, f)
        os.rename(tmp, directory)
    nbytes = sum(os.path.getsize(p) for p in paths)
    return DataSet(spec, paths, spec.shards * spec.per_shard, nbytes)


def warm(paths: tuple[str, ...] | list[str]) -> None:
    """Read files once so the timed passes start from a warm page cache."""
    buf = bytearray(1 << 22)
    for path in paths:
        with open(path, "rb", buffering=0) as f:
            while f.readinto(buf):
                pass


def add_run_options(parser: Any, root: str) -> None:
    """The options of the interleaved benchmarks (``bench_decode``, ``bench_loader``):
    ``--quick --out --data-dir --rounds --min-seconds --per-shard`` and the hidden
    ``--worker --urls`` of their measuring subprocess."""
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--out", help="write the results as JSON to this file")
    parser.add_argument("--data-dir", default=os.path.join(root, "bench_data"))
    parser.add_argument("--rounds", type=int)
    parser.add_argument("--min-seconds", type=float, help="timed seconds per measurement")
    parser.add_argument("--per-shard", type=int, help="samples per shard (smaller data, for tests)")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--urls", help=argparse.SUPPRESS)


def run_conf(args: Any, quick: dict[str, Any], full: dict[str, Any]) -> dict[str, Any]:
    """The run configuration: ``quick`` or ``full`` with the options of
    :func:`add_run_options` applied (``specs`` maps a regime to ``(shards, per_shard)``)."""
    conf = dict(quick if args.quick else full)
    conf["rounds"] = args.rounds or conf["rounds"]
    if args.min_seconds is not None:
        conf["min_seconds"] = args.min_seconds
    if args.per_shard:
        conf["specs"] = {r: (n, args.per_shard) for r, (n, _) in conf["specs"].items()}
    return conf


def cpu_seconds() -> float:
    """CPU seconds of this process and its waited-for children (DataLoader workers)."""
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


@dataclass(frozen=True)
class Timed:
    """What :func:`timed_passes` measured."""

    samples: int
    passes: int
    counts: list[int]  # the distinct samples-per-pass seen (one value when every pass agrees)
    wall_s: float
    cpu_s: float


def timed_passes(one_pass: Callable[[], int], min_seconds: float, max_passes: int = 100) -> Timed:
    """Run ``one_pass`` (returns the samples it saw) until ``min_seconds`` or ``max_passes``."""
    samples = passes = 0
    counts = set()
    cpu0, t0 = cpu_seconds(), time.perf_counter()
    while True:
        n = one_pass()
        counts.add(n)
        samples += n
        passes += 1
        elapsed = time.perf_counter() - t0
        if elapsed >= min_seconds or passes >= max_passes:
            break
    return Timed(samples, passes, sorted(counts), elapsed, cpu_seconds() - cpu0)


def _proc_table() -> tuple[dict[int, list[int]], dict[int, list[str]]]:
    """Every process's children and its ``/proc/<pid>/stat`` fields after the command name."""
    children: dict[int, list[int]] = {}
    stats: dict[int, list[str]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        pid = int(entry)
        children.setdefault(int(fields[1]), []).append(pid)
        stats[pid] = fields
    return children, stats


def _descendants(pid: int, children: dict[int, list[int]]) -> list[int]:
    found, todo = [], list(children.get(pid, ()))
    while todo:
        p = todo.pop()
        found.append(p)
        todo.extend(children.get(p, ()))
    return found


def tree_rss(pid: int) -> int:
    """Sum of RSS (bytes) of ``pid`` and all its live descendants, from /proc."""
    children, stats = _proc_table()
    page = os.sysconf("SC_PAGE_SIZE")
    return sum(int(stats[p][21]) * page for p in [pid, *_descendants(pid, children)] if p in stats)


def tree_cpu_seconds() -> float:
    """CPU seconds of this process, its waited-for children and its live descendants (a
    loader's persistent child process included): the whole process tree."""
    children, stats = _proc_table()
    tick = os.sysconf("SC_CLK_TCK")
    live = sum(
        (int(stats[p][11]) + int(stats[p][12])) / tick
        for p in _descendants(os.getpid(), children)
        if p in stats
    )
    return cpu_seconds() + live


def run_json_worker(cmd: list[str], env: dict[str, str], cwd: str, what: str) -> dict[str, Any]:
    """Run ``cmd`` (a benchmark's ``--worker`` process), sampling the peak RSS of its process
    tree every 50 ms; return the JSON object of its last stdout line plus ``peak_rss`` (bytes).

    Raises:
        RuntimeError: the worker failed (``what`` and the end of its stderr in the message).
    """
    import subprocess
    import threading

    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=cwd
    )
    peak = 0
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.wait(0.05):
            peak = max(peak, tree_rss(proc.pid))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    out, err = proc.communicate()
    done.set()
    sampler.join()
    if proc.returncode != 0:
        raise RuntimeError(f"{what} failed:\n{err[-3000:]}")
    result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    result["peak_rss"] = peak
    return result
