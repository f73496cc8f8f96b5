"""The GetBatch answer's TAR parser (wds_cloud/openers/ais/batchtar.py) against Python's tarfile.

Differential: thousands of generated archives (USTAR, GNU and PAX formats, long and non-ASCII
names, sizes around block boundaries, directories and links among the files) read through
bodies that give 1 to a few hundred bytes per read; every regular member's name and bytes must
equal what ``tarfile`` reads. A stream cut at any byte either raises ``TruncatedArchive`` or
gives a prefix of the members.
"""

from __future__ import annotations

import io
import random
import tarfile

import pytest

from wds_cloud.openers.ais.batchtar import BatchTarError, TarMemberReader, TruncatedArchive

FORMATS = (tarfile.USTAR_FORMAT, tarfile.GNU_FORMAT, tarfile.PAX_FORMAT)


class TinyBody:
    """A body whose ``read1`` gives at most ``rng.randint(1, most)`` bytes."""

    def __init__(self, data: bytes, rng: random.Random, most: int) -> None:
        self.data = data
        self.pos = 0
        self.rng = rng
        self.most = most
        self.closed = False

    def read1(self, n: int) -> bytes:
        take = min(n, self.rng.randint(1, self.most))
        chunk = self.data[self.pos : self.pos + take]
        self.pos += len(chunk)
        return chunk

    def close(self) -> None:
        self.closed = True


def _name(rng: random.Random, fmt: int) -> str:
    parts = []
    for _ in range(rng.randint(1, 4)):
        alphabet = "abcxyz-_.%09 " + ("éü漢" if fmt == tarfile.PAX_FORMAT else "")
        parts.append("".join(rng.choice(alphabet) for _ in range(rng.choice((1, 5, 40, 90)))))
    name = "/".join(p.strip("/ ") or "n" for p in parts)
    if fmt == tarfile.USTAR_FORMAT:  # USTAR: name <= 100, prefix <= 155, split at a slash
        name = name[:99]
    return name


def _archive(rng: random.Random, fmt: int) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=fmt) as tar:
        for i in range(rng.randint(0, 8)):
            kind = rng.random()
            if kind < 0.1:
                info = tarfile.TarInfo(f"dir{i}")
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
                continue
            if kind < 0.15:
                info = tarfile.TarInfo(f"link{i}")
                info.type = tarfile.SYMTYPE
                info.linkname = "x" * rng.choice((3, 99 if fmt == tarfile.USTAR_FORMAT else 120))
                tar.addfile(info)
                continue
            size = rng.choice((0, 1, 511, 512, 513, 1024, rng.randint(0, 5000)))
            info = tarfile.TarInfo(_name(rng, fmt) + f".{i}")
            info.size = size
            tar.addfile(info, io.BytesIO(rng.randbytes(size)))
    return out.getvalue()


def _reference(data: bytes) -> list[tuple[str, bytes]]:
    out = []
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tar:
        for member in tar:
            if member.isfile():
                f = tar.extractfile(member)
                assert f is not None
                out.append((member.name, f.read()))
    return out


def _members(body: TinyBody) -> list[tuple[str, bytes]]:
    reader = TarMemberReader(body)  # type: ignore[arg-type]  # a Body by shape
    out = []
    while (member := reader.next_member()) is not None:
        out.append(member)
    return out


@pytest.mark.parametrize("seed", range(20))
def test_members_equal_tarfile_through_tiny_reads(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(100):
        fmt = rng.choice(FORMATS)
        data = _archive(rng, fmt)
        body = TinyBody(data, rng, rng.choice((1, 7, 600, 70000)))
        assert _members(body) == _reference(data)


def test_large_member_and_base256_size() -> None:
    rng = random.Random(1)
    big = rng.randbytes(3 << 20)
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.GNU_FORMAT) as tar:
        info = tarfile.TarInfo("big.bin")
        info.size = len(big)
        tar.addfile(info, io.BytesIO(big))
    data = bytearray(out.getvalue())
    # the same size in GNU base-256 form, checksum recomputed
    data[124:136] = b"\x80" + len(big).to_bytes(11, "big")
    data[148:156] = b" " * 8
    data[148:156] = b"%06o\0 " % (sum(data[:512]))
    assert _members(TinyBody(bytes(data), rng, 1 << 20)) == [("big.bin", big)]


def test_cut_at_every_byte_raises_or_gives_a_prefix() -> None:
    rng = random.Random(2)
    data = _archive(random.Random(5), tarfile.PAX_FORMAT)
    full = _reference(data)
    assert len(full) >= 2
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tar:
        end = max(m.offset_data + -(-m.size // 512) * 512 for m in tar.getmembers())
    for cut in range(end):  # before the end blocks
        reader = TarMemberReader(TinyBody(data[:cut], rng, 50))  # type: ignore[arg-type]
        got = []
        with pytest.raises(TruncatedArchive):
            while (member := reader.next_member()) is not None:
                got.append(member)
        assert got == full[: len(got)]


def test_bad_checksum_names_the_offset() -> None:
    data = bytearray(_archive(random.Random(3), tarfile.USTAR_FORMAT))
    while not _reference(bytes(data)):
        data = bytearray(_archive(random.Random(len(data)), tarfile.USTAR_FORMAT))
    data[0] ^= 0x01
    with pytest.raises(BatchTarError, match=r"checksum mismatch \(byte 0 of the GetBatch"):
        _members(TinyBody(bytes(data), random.Random(0), 100))


def test_empty_answer_is_truncated_and_end_blocks_end() -> None:
    with pytest.raises(TruncatedArchive, match="ended at byte 0 without the archive's end"):
        _members(TinyBody(b"", random.Random(0), 10))
    assert _members(TinyBody(bytes(1024), random.Random(0), 10)) == []
