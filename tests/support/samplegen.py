"""Seeded WebDataset-style shards (several members per sample) for the index tests.

:mod:`tests.support.targen` draws archives member by member (every member its own sample); the
index tests also need what real shards look like: samples of one to four members sharing a
key, keys in directories and long enough for ustar prefixes and GNU long names, written by
stdlib ``tarfile`` (ustar, GNU, PAX with a header per member), webdataset's ``TarWriter`` and
ours, with entries the reader skips in between. Sizes and payloads come from ``targen``.

``generate(seed, dali_safe=True)`` restricts a draw to what DALI's ``wds2idx.py`` handles
exactly (see ``docs/indexes.md``): ustar or GNU archives from ``tarfile``, at least one sample,
printable ASCII names without whitespace or backslashes, regular files of type ``0``, and only
directories, symlinks and hard links as other entries.
"""

from __future__ import annotations

import io
import random
import tarfile
from dataclasses import dataclass
from typing import Any

import webdataset

from tests.support.targen import MTIME, UNICODE, _payload, _size

EXTS = ("jpg", "JPG", "png", "cls", "json", "txt", "seg.png", "input.npy", "tar.gz", "x_y")
DIRS = ("train", "a", "b-1", "2024", "x.y", "shard_00", "dir" + "d" * 60)


@dataclass(frozen=True)
class SampleArchive:
    """One generated shard.

    Attributes:
        seed: ``generate(seed, dali_safe=...)`` rebuilds it.
        producer: ``ustar``, ``gnu``, ``pax`` (tarfile), ``wds`` (webdataset), ``ours``.
        blob: the tar bytes (never compressed).
        nsamples: samples as written (the reader's count when no key repeats consecutively).
        features: what it exercises.
    """

    seed: int
    dali_safe: bool
    producer: str
    blob: bytes
    nsamples: int
    features: frozenset[str]

    def __str__(self) -> str:
        return (
            f"samplegen.generate({self.seed}, dali_safe={self.dali_safe}): {self.producer}, "
            f"{self.nsamples} samples, {len(self.blob)} bytes, features={sorted(self.features)}"
        )


def _key(rng: random.Random, i: int, odd: set[str], features: set[str]) -> str:
    """A sample key; ``odd`` holds what this archive may use: ``unicode``, ``whitespace``."""
    stem = f"k{i:05d}"
    r = rng.random()
    if r < 0.4:
        return stem
    if r < 0.7:
        return "/".join(rng.choice(DIRS) for _ in range(rng.randint(1, 3))) + "/" + stem
    if r < 0.85:  # long: ustar prefix split or GNU long name / PAX path
        features.add("long-name")
        head = "/".join("p" * rng.randint(20, 60) for _ in range(rng.randint(1, 3)))
        return f"{head}/{stem}{'q' * rng.randint(0, 90)}"
    if "unicode" in odd and r < 0.93:
        features.add("non-ascii")
        return f"{rng.choice(UNICODE)}/{stem}"
    if "whitespace" in odd and r < 0.95:
        features.add("whitespace")
        return f"sub dir/{stem}"
    return f"{rng.choice(DIRS)}/{stem}-{'z' * rng.randint(0, 40)}"


def _samples(
    rng: random.Random, count: int, odd: set[str], features: set[str]
) -> list[dict[str, Any]]:
    samples = []
    for i in range(count):
        key = _key(rng, i, odd, features)
        sample: dict[str, Any] = {"__key__": key}
        for ext in rng.sample(EXTS, rng.randint(1, 4)):
            if ext.lower() in {e.lower() for e in sample if e != "__key__"}:
                continue  # JPG and jpg in one sample would be a duplicate extension
            sample[ext] = _payload(rng, _size(rng, 4096))
        samples.append(sample)
    return samples


def _extra(rng: random.Random, i: int, safe: bool, features: set[str]) -> tarfile.TarInfo | None:
    """An entry between samples that the sample reader skips (None: none this time)."""
    r = rng.random()
    if r > 0.15:
        return None
    info = tarfile.TarInfo(f"e{i:05d}")
    info.mtime = MTIME
    kind = rng.choice(("dir", "sym", "lnk") if safe else ("dir", "sym", "lnk", "meta", "noext"))
    features.add(f"extra-{kind}")
    if kind == "dir":
        info.type = tarfile.DIRTYPE
        info.name += "/"
    elif kind == "sym":
        info.type = tarfile.SYMTYPE
        info.linkname = "target.jpg"
    elif kind == "lnk":
        info.type = tarfile.LNKTYPE
        info.linkname = "k00000.jpg"
    elif kind == "meta":
        info.name = f"__meta{i}__"
        info.size = 3
    else:
        info.name = rng.choice((f"noext{i}", f".hidden{i}", f"d/.hidden{i}"))
        info.size = 3
    return info


def _fits_ustar(name: str) -> bool:
    try:
        tarfile.TarInfo(name).tobuf(tarfile.USTAR_FORMAT, "utf-8", "surrogateescape")
    except ValueError:
        return False
    return True


def _tarfile_blob(
    rng: random.Random, producer: str, samples: list[dict[str, Any]], safe: bool, features: set
) -> bytes:
    fmt = {"ustar": tarfile.USTAR_FORMAT, "gnu": tarfile.GNU_FORMAT, "pax": tarfile.PAX_FORMAT}
    frac = producer == "pax" and rng.random() < 0.7  # a PAX header before every member
    out = io.BytesIO()
    with tarfile.open(
        fileobj=out, mode="w", format=fmt[producer], encoding="utf-8", errors="surrogateescape"
    ) as tf:
        for i, sample in enumerate(samples):
            extra = _extra(rng, i, safe, features)
            if extra is not None:
                tf.addfile(extra, io.BytesIO(b"xyz") if extra.size else None)
            exts = sorted(k for k in sample if k != "__key__")
            if producer == "ustar" and not all(
                _fits_ustar(f"{sample['__key__']}.{ext}") for ext in exts
            ):
                sample["__key__"] = f"k{i:05d}-short"  # no ustar prefix/name split exists
                features.add("renamed")
            for ext in exts:
                info = tarfile.TarInfo(f"{sample['__key__']}.{ext}")
                info.size = len(sample[ext])
                info.mtime = MTIME + (rng.random() if frac else 0)  # type: ignore[assignment]
                info.mode = 0o644
                tf.addfile(info, io.BytesIO(sample[ext]))
    return out.getvalue()


def generate(seed: int, *, dali_safe: bool = False) -> SampleArchive:
    """Build the shard of ``seed`` (see the module docstring)."""
    rng = random.Random(seed ^ 0x1DE)
    features: set[str] = set()
    count = rng.randint(1, 30) if dali_safe or rng.random() > 0.05 else 0
    if dali_safe:
        producer = rng.choice(("ustar", "gnu"))
    else:
        producer = rng.choices(("ustar", "gnu", "pax", "wds", "ours"), (2, 2, 2, 2, 2))[0]
    odd: set[str] = set()
    if not dali_safe and rng.random() < 0.4:
        odd.add("unicode")
    if not dali_safe and rng.random() < 0.1:
        odd.add("whitespace")
    samples = _samples(rng, count, odd, features)
    if producer in ("ustar", "gnu", "pax"):
        blob = _tarfile_blob(rng, producer, samples, dali_safe, features)
    elif producer == "wds":
        out = io.BytesIO()
        with webdataset.TarWriter(out, encoder=False, mtime=MTIME + 0.5) as writer:
            for sample in samples:
                writer.write(sample)
        blob = out.getvalue()
    else:
        from wds_cloud.writing.tarwriter import TarWriter

        out = io.BytesIO()
        with TarWriter(out, encoder=False) as ours:
            for sample in samples:
                ours.write(sample)
        blob = out.getvalue()
    return SampleArchive(seed, dali_safe, producer, blob, len(samples), frozenset(features))


def archives(seeds: range, *, dali_safe: bool = False) -> list[SampleArchive]:
    """``generate(seed, dali_safe=dali_safe)`` for every seed."""
    return [generate(seed, dali_safe=dali_safe) for seed in seeds]
