"""Seeded random tar archives and reference readings for the tar reader's differential tests.

One generator for every ``test_tar_differential.py`` (``tests/core``, ``tests/openers``,
``tests/s3``, ``tests/gcs``, ``tests/ais``). ``generate(seed)`` returns the same bytes for the
same seed on every run, so a failure message names the seed that reproduces it::

    from tests.support.targen import generate, tarfile_members
    arch = generate(1234)
    list(iter_tar(io.BytesIO(arch.blob), bufsize=arch.bufsize)) == tarfile_members(arch.blob)

What one seed draws:

- the producer: stdlib ``tarfile`` writing ustar, GNU (names and link targets over 100 bytes as
  ``L``/``K`` records) or PAX (``path``/``linkpath`` records, a PAX header before every member
  when mtimes are fractional, global ``g`` headers, records that merely contain ``path=`` or
  ``size=``), or webdataset's own ``TarWriter`` (PAX, a header before every member);
- the buffer size the reader is given (``Archive.bufsize``: 512 B to 16 KiB, a few below 512)
  and member sizes relative to it: 0, small, exact multiples of 512 and of the buffer size and
  their neighbours, and up to four buffers;
- names: short, in directories, over 100 bytes (ustar prefix split, GNU ``L``, PAX ``path``),
  exactly 99/100/101/155/256 bytes, UTF-8, bytes that are not UTF-8, ``=`` and spaces;
- entries the reader skips: directories, symlinks, hard links, FIFOs and devices (some with a
  non-zero size field and, as POSIX says, no data) and vendor types with data (``D``, ``V``, and
  letters nobody defines);
- header encodings of other writers, patched in after ``tarfile`` wrote the archive: size fields
  as 11 digits + space, space-padded, 12 digits without terminator (libarchive, members of 8 to
  64 GiB), unpadded, GNU base-256; PAX ``size`` records over a wrong ustar size and PAX
  ``path`` records over a different ustar name; ``AREGTYPE``/``CONTTYPE`` regular files; V7
  headers (no magic); Solaris ``X`` extended headers; other checksum layouts, signed checksums;
- compression: none, gzip (sometimes two gzip members), bzip2, xz.

``tarfile_members`` is the reference; ``Archive.members`` is what the generator meant to write,
and a test checks the two agree, so the reference cannot silently read something else.
"""

from __future__ import annotations

import bz2
import functools
import gzip
import io
import lzma
import random
import tarfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import webdataset

from wds_cloud.core.tar import DEFAULT_BUFSIZE, iter_tar
from wds_cloud.openers.registry import open_url

BLOCK = 512
ZERO = bytes(BLOCK)
BUFSIZES = (512, 1000, 1024, 1536, 2048, 3000, 4096, 5000, 8192, 12345, 16384)
SMALL_BUFSIZES = (512, 700, 1024, 1536, 2048)
ODD_BUFSIZES = (1, 100, 511)  # below one tar block
EXTS = ("jpg", "png", "cls", "json", "txt", "bin", "seg.png", "JPG", "input.npy", "tar")
WORDS = ("a", "train", "x.y", "sub dir", "d-1", "2024", "shard_00")
UNICODE = ("données", "ключ", "日本語", "ü", "🙂", "naïve", "Ελληνικά", "中")
NOT_UTF8 = ("lat\udce9", "\udcff\udcfe", "ok\udc80")  # raw bytes 0xe9, 0xff 0xfe, 0x80
MTIME = 1_700_000_000
KINDS = ("reg", "dir", "sym", "lnk", "dev", "vendor")
KIND_WEIGHTS = (80, 5, 4, 3, 4, 2)
_NO_DATA_TYPES = b"123456"  # POSIX: links, devices, directories, FIFOs store no data
_REGULAR_TYPES = b"07\x00"

Member = tuple[str, bytes]


@dataclass(frozen=True)
class Archive:
    """One generated archive.

    Attributes:
        seed: ``generate(seed, small=...)`` rebuilds it.
        producer: ``ustar``, ``gnu``, ``pax`` (stdlib tarfile) or ``wds`` (webdataset's TarWriter).
        compression: ``""``, ``"gz"``, ``"bz2"`` or ``"xz"``.
        bufsize: the ``bufsize=`` to read it with.
        tar: the uncompressed archive.
        blob: the bytes as stored (``tar`` compressed when ``compression``).
        members: the regular files written, in order (name, data; the data are read-only
            views into ``tar``, equal to the bytes).
        data_ends: for each member, the offset in ``tar`` where its data ends.
        headers: offsets in ``tar`` of every header block (extended headers included).
        end: offset in ``tar`` of the end-of-archive marker.
        features: what this archive exercises (see the module docstring), for coverage checks.
    """

    seed: int
    small: bool
    producer: str
    compression: str
    bufsize: int
    tar: bytes
    blob: bytes
    members: tuple[Member, ...]
    data_ends: tuple[int, ...]
    headers: tuple[int, ...]
    end: int
    features: frozenset[str]

    def __str__(self) -> str:
        comp = f"+{self.compression}" if self.compression else ""
        return (
            f"generate({self.seed}, small={self.small}): {self.producer}{comp}, "
            f"bufsize={self.bufsize}, {len(self.members)} files, {len(self.tar)} bytes, "
            f"features={sorted(self.features)}"
        )


def archives(seeds: range, *, small: bool = False) -> list[Archive]:
    """``generate(seed, small=small)`` for every seed."""
    return [generate(seed, small=small) for seed in seeds]


def generate(seed: int, *, small: bool = False) -> Archive:
    """Build the archive of ``seed``; ``small`` keeps buffers at 2 KiB or less (tiny-read paths)."""
    rng = random.Random(seed)
    features: set[str] = set()
    if small:
        bufsize = rng.choice(SMALL_BUFSIZES)
    elif rng.random() < 0.03:
        bufsize = rng.choice(ODD_BUFSIZES)
        features.add("bufsize<512")
    else:
        bufsize = rng.choice(BUFSIZES)
    count = rng.choice((0, 1, 2, 3)) if rng.random() < 0.08 else rng.randint(4, 12 if small else 30)
    producer = rng.choices(("ustar", "gnu", "pax", "wds"), (3, 3, 4, 1))[0]
    if producer == "wds":
        tar, members = _webdataset_tar(rng, count, bufsize, features)
    else:
        tar, members = _tarfile_tar(rng, producer, count, bufsize, features)
    headers, end = _walk(tar)
    regular = [(off, size) for off, kind, size in headers if kind in _REGULAR_TYPES]
    if len(regular) != len(members):
        raise AssertionError(f"seed {seed}: wrote {len(members)} files, found {len(regular)}")
    data_ends = tuple(off + BLOCK + size for off, size in regular)
    if producer != "wds":
        tar = _patch_headers(rng, producer, tar, headers, members, features)
    compression = rng.choices(("", "gz", "bz2", "xz"), (14, 4, 1, 1))[0]
    blob = _compress(rng, tar, compression, features)
    features.update(_size_features(members, bufsize))
    return Archive(
        seed=seed,
        small=small,
        producer=producer,
        compression=compression,
        bufsize=bufsize,
        tar=tar,
        blob=blob,
        members=_views(tar, [m.name for m in members], regular),
        data_ends=data_ends,
        headers=tuple(off for off, _, _ in headers),
        end=end,
        features=frozenset(features),
    )


def _views(tar: bytes, names: list[str], regular: list[tuple[int, int]]) -> tuple[Member, ...]:
    """(name, data) with the data as views into ``tar`` (they compare equal to bytes), so an
    archive holds its files once."""
    view = memoryview(tar)
    return tuple(
        (name, view[off + BLOCK : off + BLOCK + size])  # type: ignore[misc]
        for name, (off, size) in zip(names, regular, strict=True)
    )


# -- what goes in --------------------------------------------------------------------------


@dataclass
class _Entry:
    name: str
    data: bytes
    pax_size: bool = False  # write a PAX size record and make the ustar size field lie


def _size(rng: random.Random, bufsize: int) -> int:
    scale = max(bufsize, BLOCK)
    r = rng.random()
    if r < 0.12:
        return 0
    if r < 0.37:
        return rng.randint(1, 600)
    if r < 0.47:
        return BLOCK * rng.randint(1, 8)
    if r < 0.57:
        return max(0, scale * rng.randint(1, 4) + rng.choice((-512, -511, -1, 0, 1, 511, 512)))
    if r < 0.65:
        return BLOCK * rng.randint(1, 16) + rng.choice((-1, 1))
    if r < 0.85:
        return rng.randint(1, scale)
    return rng.randint(scale, 4 * scale)


def _payload(rng: random.Random, size: int) -> bytes:
    return rng.randbytes(size)


def _name(rng: random.Random, i: int) -> str:
    stem = f"s{i:05d}"
    ext = rng.choice(EXTS)
    r = rng.random()
    if r < 0.45:
        return f"{stem}.{ext}"
    if r < 0.6:
        dirs = "/".join(rng.choice(WORDS) for _ in range(rng.randint(1, 3)))
        return f"{dirs}/{stem}.{ext}"
    if r < 0.7:  # long: a directory part and a base that each fit the ustar fields
        head = "/".join(f"dir{'d' * rng.randint(0, 40)}" for _ in range(rng.randint(1, 4)))
        base = f"{stem}{'k' * rng.randint(0, 80)}.{ext}"
        return f"{head}/{base}"
    if r < 0.8:  # exact byte lengths around the field sizes
        target = rng.choice((99, 100, 101, 155, 156, 256))
        head = f"{stem}.{ext}"
        if target <= 100:
            return "n" * (target - len(head)) + head
        base = min(100, target - 2)  # the directory part is 1 to 155 bytes: the prefix field
        return "p" * (target - base - 1) + "/" + "n" * (base - len(head)) + head
    if r < 0.9:
        return f"{rng.choice(UNICODE)}/{stem}-{rng.choice(UNICODE)}.{ext}"
    if r < 0.95:
        return f"{rng.choice(NOT_UTF8)}/{stem}{rng.choice(NOT_UTF8)}.{ext}"
    return f"odd =dir/{stem} path=x size=12.{ext}"


def _fits(info: tarfile.TarInfo, fmt: int) -> bool:
    try:
        info.tobuf(fmt, "utf-8", "surrogateescape")
    except ValueError:  # ustar: name cannot be split into prefix/name, or linkname too long
        return False
    return True


def _tarfile_tar(
    rng: random.Random, producer: str, count: int, bufsize: int, features: set[str]
) -> tuple[bytes, list[_Entry]]:
    fmt = {"ustar": tarfile.USTAR_FORMAT, "gnu": tarfile.GNU_FORMAT, "pax": tarfile.PAX_FORMAT}[
        producer
    ]
    global_pax: dict[str, str] = {}
    frac_mtime = producer == "pax" and rng.random() < 0.5
    if producer == "pax" and rng.random() < 0.3 and count:  # (tarfile fails on a lone 'g')
        global_pax = {"comment": "global path=g/x size=7 ⌘", "wds.note": rng.choice(UNICODE)}
        features.add("pax-global")
    if frac_mtime:
        features.add("pax-every-member")
    out = io.BytesIO()
    members: list[_Entry] = []
    specials_sized = rng.random() < 0.3
    with tarfile.open(
        fileobj=out,
        mode="w",
        format=fmt,
        pax_headers=global_pax,
        encoding="utf-8",
        errors="surrogateescape",
    ) as tf:
        for i in range(count):
            kind = rng.choices(KINDS, KIND_WEIGHTS)[0]
            info = tarfile.TarInfo()
            info.mtime = MTIME + (rng.random() if frac_mtime else 0)  # type: ignore[assignment]
            info.mode = 0o644
            if kind == "reg":
                entry = _Entry(_name(rng, i), _payload(rng, _size(rng, bufsize)))
                info.name = entry.name
                if producer == "ustar" and not _fits(info, fmt):
                    entry.name = info.name = f"s{i:05d}.bin"  # no prefix/name split exists
                info.size = len(entry.data)
                if producer == "pax":
                    r = rng.random()
                    if r < 0.15:
                        info.pax_headers = {"size": str(info.size)}
                        entry.pax_size = True
                        features.add("pax-size")
                    elif r < 0.25:  # the ustar name field says something else
                        info.pax_headers = {"path": entry.name}
                        info.name = f"wrong{i}.txt"
                        features.add("pax-path")
                    elif r < 0.35:
                        info.pax_headers = {"comment": "size=1 path=nothing", "wds.x": "path="}
                        features.add("pax-decoy")
                tf.addfile(info, io.BytesIO(entry.data))
                members.append(entry)
                _name_features(entry.name, producer, features)
                continue
            info.name = f"e{i:05d}" + ("/" if kind == "dir" else "")
            if kind == "dir":
                info.type = tarfile.DIRTYPE
            elif kind in ("sym", "lnk"):
                info.type = tarfile.SYMTYPE if kind == "sym" else tarfile.LNKTYPE
                long = producer != "ustar" and rng.random() < 0.3
                info.linkname = ("t" * 120 if long else "t") + f"/{i}.jpg"
                if long:
                    features.add("long-linkname")
            elif kind == "dev":
                info.type = rng.choice((tarfile.FIFOTYPE, tarfile.CHRTYPE, tarfile.BLKTYPE))
            features.add(f"skip-{kind}")
            if kind == "vendor":
                info.type = rng.choice((b"D", b"V", b"A", b"Z"))
                data = _payload(rng, _size(rng, bufsize))
                info.size = len(data)
                if info.type in (b"A", b"Z"):
                    features.add("unknown-type")
                tf.addfile(info, io.BytesIO(data))
                continue
            if specials_sized and rng.random() < 0.5:
                info.size = rng.randint(1, 3 * bufsize)  # a size field with no data after it
                features.add("special-size")
            tf.addfile(info)
    return out.getvalue(), members


def _webdataset_tar(
    rng: random.Random, count: int, bufsize: int, features: set[str]
) -> tuple[bytes, list[_Entry]]:
    """Samples written by webdataset's TarWriter (PAX, fractional mtime: a header per member)."""
    out = io.BytesIO()
    members: list[_Entry] = []
    with webdataset.TarWriter(out, encoder=False, mtime=MTIME + 0.25) as writer:
        i = 0
        while len(members) < count:
            key = _name(rng, i).rsplit(".", 1)[0].replace(".", "_")
            exts = rng.sample(("jpg", "cls", "json", "txt", "seg.png", "npy"), rng.randint(1, 3))
            sample: dict[str, Any] = {"__key__": key}
            for ext in exts:
                sample[ext] = _payload(rng, _size(rng, bufsize))
            writer.write(sample)
            for ext in sorted(exts):
                members.append(_Entry(f"{key}.{ext}", sample[ext]))
                _name_features(f"{key}.{ext}", "pax", features)
            i += 1
    features.add("pax-every-member")
    return out.getvalue(), members


def _name_features(name: str, producer: str, features: set[str]) -> None:
    raw = name.encode("utf-8", "surrogateescape")
    if len(raw) > 100:
        features.add({"ustar": "ustar-prefix", "gnu": "gnu-longname"}.get(producer, "pax-path"))
    if len(raw) == 100:
        features.add("name-100")
    if not name.isascii():
        features.add("non-ascii")
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        features.add("not-utf8")


def _size_features(members: list[_Entry], bufsize: int) -> set[str]:
    found = set()
    for m in members:
        n = len(m.data)
        if n == 0:
            found.add("size-0")
        elif n % BLOCK == 0:
            found.add("size-512k")
        if n and n % bufsize == 0:
            found.add("size-bufsize-k")
        if n > 3 * bufsize:
            found.add("size>3buf")
    return found


# -- header walking and patching -------------------------------------------------------------


def _pad(size: int) -> int:
    return (size + BLOCK - 1) & ~(BLOCK - 1)


def _walk(tar: bytes) -> tuple[list[tuple[int, int, int]], int]:
    """(offset, typeflag, size) of every header as tarfile wrote it, and the end marker."""
    headers = []
    pos = 0
    while tar[pos : pos + BLOCK] != ZERO:
        header = tar[pos : pos + BLOCK]
        size = int(header[124:136].split(b"\0", 1)[0].strip() or b"0", 8)
        kind = header[156]
        headers.append((pos, kind, size))
        pos += BLOCK + (0 if kind in _NO_DATA_TYPES else _pad(size))
    return headers, pos


def _encode_size(value: int, how: str) -> bytes:
    if how == "space":
        return b"%011o " % value
    if how == "spaces":
        return b"%11o\0" % value
    if how == "12digits":
        return b"%012o" % value
    if how == "base256":
        return b"\x80" + value.to_bytes(11, "big")
    return (b"%o" % value).ljust(12, b"\0")  # "short"


def _signed_sum(header: bytearray) -> int:
    field = bytes(header[148:156])
    header[148:156] = b" " * 8
    total = sum(header) - 256 * sum(1 for b in header if b > 127)
    header[148:156] = field
    return total


def _set_checksum(header: bytearray, how: str) -> None:
    header[148:156] = b" " * 8
    unsigned = sum(header)
    value = unsigned
    if how == "signed":
        value = unsigned - 256 * sum(1 for b in header if b > 127)
    layout = {"std": b"%06o\0 ", "7nul": b"%07o\0", "7sp": b"%07o ", "6sp": b"%06o  "}
    header[148:156] = (layout.get(how) or layout["std"]) % value


def _patch_headers(
    rng: random.Random,
    producer: str,
    tar: bytes,
    headers: list[tuple[int, int, int]],
    members: list[_Entry],
    features: set[str],
) -> bytes:
    out = bytearray(tar)
    numeric = rng.random() < 0.3
    regular_types = rng.random() < 0.15
    solaris = producer == "pax" and rng.random() < 0.1
    v7 = producer == "ustar" and rng.random() < 0.1
    checksums = rng.random() < 0.2
    entries = iter(members)
    for off, kind, size in headers:
        header = out[off : off + BLOCK]
        changed = False
        entry = next(entries) if kind in _REGULAR_TYPES else None
        if entry is not None and entry.pax_size:
            wrong = rng.choice((0, size + BLOCK * rng.randint(1, 9), rng.randint(0, 8**11 - 1)))
            header[124:136] = b"%011o\0" % wrong
            changed = True
        elif numeric and rng.random() < 0.5:
            how = rng.choice(("space", "spaces", "12digits", "base256", "short"))
            header[124:136] = _encode_size(size, how)
            features.add(f"size-{how}")
            changed = True
        # (tarfile reads AREGTYPE with a name field ending in "/" as an old-style directory)
        plain_name = not header[:100].split(b"\0", 1)[0].endswith(b"/")
        if entry is not None and regular_types and plain_name and rng.random() < 0.5:
            header[156] = rng.choice(b"\x007")
            features.add("aregtype-conttype")
            changed = True
        if solaris and kind == ord("x"):
            header[156] = ord("X")
            features.add("solaris-X")
            changed = True
        if v7 and header[345] == 0:
            header[257:BLOCK] = bytes(BLOCK - 257)
            features.add("v7")
            changed = True
        how = "std"
        if checksums and rng.random() < 0.5:
            how = rng.choice(("7nul", "7sp", "6sp", "signed"))
            if how == "signed" and (max(header) < 128 or _signed_sum(header) < 0):
                how = "std"
            if how != "std":
                features.add(f"chksum-{how}")
            changed = True
        if changed:
            _set_checksum(header, how)
            out[off : off + BLOCK] = header
    return bytes(out)


def _compress(rng: random.Random, tar: bytes, how: str, features: set[str]) -> bytes:
    if how == "gz":
        if len(tar) > BLOCK and rng.random() < 0.25:
            cut = rng.randint(1, len(tar) - 1)
            features.add("gz-multi")
            return gzip.compress(tar[:cut], 1, mtime=0) + gzip.compress(tar[cut:], 1, mtime=0)
        return gzip.compress(tar, 1, mtime=0)
    if how == "bz2":
        return bz2.compress(tar, 1)
    if how == "xz":
        return lzma.compress(tar, preset=0)
    return tar


# -- references and streams ------------------------------------------------------------------


def decompress(blob: bytes) -> bytes:
    """The tar inside ``blob`` (gzip, bzip2, xz or none), with the standard library."""
    if blob[:2] == b"\x1f\x8b":
        return gzip.decompress(blob)
    if blob[:3] == b"BZh":
        return bz2.decompress(blob)
    if blob[:6] == b"\xfd7zXZ\x00":
        return lzma.decompress(blob)
    return blob


def tarfile_members(blob: bytes) -> list[Member]:
    """The regular files of an archive as stdlib ``tarfile`` reads them (the reference).

    ``tarfile`` refuses an archive without members ("end of file header"); that one is ``[]``.
    """
    if decompress(blob)[:BLOCK] == ZERO:
        return []
    with tarfile.open(
        fileobj=io.BytesIO(blob), mode="r:*", encoding="utf-8", errors="surrogateescape"
    ) as tf:
        out = []
        for info in tf:
            if info.isreg():
                f = tf.extractfile(info)
                assert f is not None
                out.append((info.name, f.read()))
        return out


def tarfile_complete_members(blob: bytes) -> list[Member]:
    """The regular files ``tarfile`` reads completely from a damaged archive before it fails
    (or silently stops: it does both)."""
    out: list[Member] = []
    try:
        with tarfile.open(
            fileobj=io.BytesIO(blob), mode="r:", encoding="utf-8", errors="surrogateescape"
        ) as tf:
            for info in tf:
                if info.isreg():
                    f = tf.extractfile(info)
                    assert f is not None
                    data = f.read()
                    if len(data) != info.size:
                        break
                    out.append((info.name, data))
    except (tarfile.TarError, EOFError, OSError):
        pass
    return out


class ChunkedStream(io.RawIOBase):
    """A non-seekable raw stream (no ``fileno``) whose reads return ``sizes`` bytes in turn."""

    def __init__(self, data: bytes, sizes: list[int]) -> None:
        super().__init__()
        self._data = memoryview(data)
        self._pos = 0
        self._sizes = sizes
        self._turn = 0
        self.reads = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        want = self._sizes[self._turn % len(self._sizes)]
        self._turn += 1
        n = min(len(buffer), want, len(self._data) - self._pos)
        buffer[:n] = self._data[self._pos : self._pos + n]
        self._pos += n
        self.reads += 1
        return n


def random_chunks(arch: Archive) -> ChunkedStream:
    """Reads of 1 byte to three buffers, a pattern drawn from the archive's seed."""
    rng = random.Random(arch.seed ^ 0x5EED)
    top = 3 * max(arch.bufsize, BLOCK)
    return ChunkedStream(arch.blob, [rng.randint(1, top) for _ in range(17)])


def tiny_chunks(arch: Archive) -> ChunkedStream:
    """Reads of 1 to 7 bytes (varying), like a slow socket."""
    rng = random.Random(arch.seed ^ 0x7)
    return ChunkedStream(arch.blob, [rng.randint(1, 7) for _ in range(23)])


def url_reader(registry: Any) -> Callable[[Archive, str], list[Member]]:
    """Read ``(archive, url)`` through ``open_url(url, registry=registry)`` and ``iter_tar``
    with the archive's small buffer."""

    def read(arch: Archive, url: str) -> list[Member]:
        stream = open_url(url, registry=registry)
        try:
            return list(iter_tar(stream, url=url, bufsize=arch.bufsize))
        finally:
            stream.close()

    return read


def compare(
    items: Sequence[tuple[Archive, str]],
    read: Callable[[Archive, str], list[Member]],
    *,
    verified: bool = False,
) -> list[str]:
    """Read every ``(archive, where)`` with ``read`` and compare with ``tarfile``; the mismatches.

    Args:
        items: archives and where to read each from (a URL, or a label for local paths).
        read: returns the ``(name, data)`` pairs the reader under test yields.
        verified: the archives' ``members`` were checked to equal tarfile's reading already
            (tests/core does it once for its 2000): compare with them instead of re-reading.

    Each mismatch names the archive (its seed rebuilds it) and the first differing member.
    """
    failures = []
    for arch, where in items:
        want = list(arch.members) if verified else tarfile_members(arch.blob)
        try:
            got = read(arch, where)
        except Exception as exc:  # a reader error on a valid archive is a mismatch too
            failures.append(f"{arch} @ {where}: {type(exc).__name__}: {exc}")
            continue
        if got != want:
            failures.append(f"{arch} @ {where}: {_first_difference(got, want)}")
    return failures


def _first_difference(got: list[Member], want: list[Member]) -> str:
    for i, (g, w) in enumerate(zip(got, want, strict=False)):
        if g != w:
            if g[0] != w[0]:
                return f"member {i}: name {g[0]!r} != {w[0]!r}"
            return f"member {i} {w[0]!r}: {len(g[1])} bytes differ from tarfile's {len(w[1])}"
    return f"{len(got)} members, tarfile has {len(want)}"


def report(failures: list[str], total: int) -> str:
    """An assertion message: how many failed and the first few."""
    shown = "\n  ".join(failures[:5])
    return f"{len(failures)} of {total} archives read differently from tarfile:\n  {shown}"


# -- the original failure, end to end ---------------------------------------------------------


def straddle_shard(seed: int, *, bufsize: int, tail: int) -> tuple[bytes, list[dict[str, Any]]]:
    """A shard that makes a stream reader with ``bufsize`` meet the original failure.

    The first member is larger than the buffer; then small samples (``.cls`` + ``.txt``) are
    laid out so that one member's data ends ``tail`` bytes before the end of the buffer read
    right after the large member, with its padding running past that end, and more than a
    hundred members follow. Returns the ustar bytes and the samples (``__key__`` + extensions).

    Args:
        seed: draws the sizes and contents.
        bufsize: the reader's buffer size (a multiple of 512).
        tail: bytes between the straddling member's data end and the buffer end; less than the
            large member's size modulo 512 (which is 1 to 511), so the padding straddles.
    """
    rng = random.Random(seed)
    big_size = bufsize + BLOCK * rng.randint(1, 4) + tail + 1 + rng.randint(0, 510 - tail)
    if not 0 <= tail < big_size % BLOCK:
        raise ValueError(f"tail {tail} must be below {big_size % BLOCK}")
    files: list[tuple[str, bytes]] = [("000000.bin", _payload(rng, big_size))]
    buffer_end = BLOCK + big_size + bufsize  # stream offset where the next buffer ends
    pos = BLOCK + _pad(big_size)
    i = 0
    while True:
        size = rng.randint(1, 1500)
        if pos + BLOCK + _pad(size) + BLOCK + 1 + tail > buffer_end:
            break
        files.append((_small_name(i), _payload(rng, size)))
        pos += BLOCK + _pad(size)
        i += 1
    last = buffer_end - tail - (pos + BLOCK)
    files.append((_small_name(i), _payload(rng, last)))
    assert pos + BLOCK + last + tail == buffer_end < pos + BLOCK + _pad(last)
    for j in range(i + 1, i + 200):
        files.append((_small_name(j), _payload(rng, rng.randint(0, 1500))))
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.USTAR_FORMAT) as tf:
        for name, data in files:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mtime = MTIME
            tf.addfile(info, io.BytesIO(data))
    return out.getvalue(), list(_group(files))


@functools.cache
def default_straddle_shards() -> tuple[tuple[bytes, list[dict[str, Any]]], ...]:
    """Two shards (about 8.5 MB each) that hit the original failure with the default 4 MiB
    buffer: the padding runs entirely past the buffer end, and partly. Built once."""
    return tuple(
        straddle_shard(seed, bufsize=DEFAULT_BUFSIZE, tail=tail)
        for seed, tail in ((1, 0), (2, 300))
    )


def pipeline_samples(urls: list[str], registry: Any = None) -> list[dict[str, Any]]:
    """The samples ``wds.WebDataset(urls)`` yields (default buffer), without ``__url__`` and
    ``__local_path__``, for comparing with :func:`default_straddle_shards`' samples."""
    import wds_cloud as wds

    dataset = wds.WebDataset(urls, registry=registry, shardshuffle=False)
    return [{k: v for k, v in s.items() if k not in ("__url__", "__local_path__")} for s in dataset]


def tarfile_members_ignoring_zeros(blob: bytes) -> list[Member]:
    """Like :func:`tarfile_members`, reading past zero blocks (``ignore_zeros=True``)."""
    with tarfile.open(
        fileobj=io.BytesIO(blob), encoding="utf-8", errors="surrogateescape", ignore_zeros=True
    ) as tf:
        return [(i.name, tf.extractfile(i).read()) for i in tf if i.isreg()]  # type: ignore[union-attr]


def _small_name(i: int) -> str:
    return f"{1 + i // 2:06d}.{'cls' if i % 2 == 0 else 'txt'}"


def _group(files: list[tuple[str, bytes]]) -> Iterator[dict[str, Any]]:
    sample: dict[str, Any] = {}
    for name, data in files:
        key, ext = name.split(".", 1)
        if sample and sample["__key__"] != key:
            yield sample
            sample = {}
        sample.setdefault("__key__", key)
        sample[ext] = data
    if sample:
        yield sample


def upload_all(
    seeds: range, put: Callable[[str, bytes], None], prefix: str
) -> tuple[list[tuple[Archive, str]], list[str]]:
    """Store the archives of ``seeds`` and the original-failure shards through ``put(key,
    data)``; return ``(archive, URL)`` pairs and the shard URLs (``prefix`` + key)."""
    items = []
    for arch in archives(seeds):
        put(f"{arch.seed}.tar", arch.blob)
        items.append((arch, f"{prefix}{arch.seed}.tar"))
    straddle = []
    for i, (data, _) in enumerate(default_straddle_shards()):
        put(f"straddle-{i}.tar", data)
        straddle.append(f"{prefix}straddle-{i}.tar")
    return items, straddle


def assert_reads_like_tarfile(items: list[tuple[Archive, str]], registry: Any) -> None:
    """Every archive, opened by URL through ``registry``, reads as tarfile reads it."""
    failures = compare(items, url_reader(registry))
    assert not failures, report(failures, len(items))


def assert_pipeline_reads_the_original_failure(urls: list[str], registry: Any) -> None:
    """``wds.WebDataset`` over the original-failure shards yields every sample, in order."""
    expected = [s for _, samples in default_straddle_shards() for s in samples]
    assert pipeline_samples(urls, registry) == expected
