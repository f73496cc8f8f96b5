"""The streaming tar reader: formats, compression, streams, and every kind of bad input."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import tarfile
import threading

import pytest

from tests.support.tarbuild import gz, tar_bytes, write
from wds_cloud.core.tar import iter_tar
from wds_cloud.errors import ShardReadError, WdsCloudError

MEMBERS = [
    ("a.txt", b"hello"),
    ("a.json", b'{"x": 1}'),
    ("empty.bin", b""),
    ("dir.x/b.cls", b"7"),
    ("big.bin", bytes(range(256)) * 4097),
]


class NoFileno(io.RawIOBase):
    """A non-seekable stream delivering at most ``step`` bytes per read (like a socket)."""

    def __init__(self, data: bytes, step: int = 1000) -> None:
        self.data = data
        self.pos = 0
        self.step = step

    def readable(self) -> bool:
        return True

    def readinto(self, b: bytearray) -> int:  # type: ignore[override]
        n = min(len(b), self.step, len(self.data) - self.pos)
        b[:n] = self.data[self.pos : self.pos + n]
        self.pos += n
        return n


def read_all(
    data: bytes, how: str, tmp_path: object = None, **kw: object
) -> list[tuple[str, bytes]]:
    if how == "bytes":
        return list(iter_tar(io.BytesIO(data), **kw))  # type: ignore[arg-type]
    if how == "trickle":
        return list(iter_tar(NoFileno(data, 777), bufsize=4096, **kw))  # type: ignore[arg-type]
    path = write(os.path.join(str(tmp_path), "shard.tar"), data)
    with open(path, "rb", buffering=0) as f:
        return list(iter_tar(f, **kw))  # type: ignore[arg-type]


HOW = ["bytes", "trickle", "file"]


@pytest.mark.parametrize("how", HOW)
@pytest.mark.parametrize(
    "fmt",
    [tarfile.USTAR_FORMAT, tarfile.GNU_FORMAT, tarfile.PAX_FORMAT],
    ids=["ustar", "gnu", "pax"],
)
def test_formats_read_like_tarfile(tmp_path: object, how: str, fmt: int) -> None:
    data = tar_bytes(MEMBERS, fmt=fmt, mtime=1_700_000_000.5 if fmt == tarfile.PAX_FORMAT else 1)
    assert read_all(data, how, tmp_path) == MEMBERS


@pytest.mark.parametrize("how", HOW)
def test_long_and_non_ascii_names(tmp_path: object, how: str) -> None:
    members = [
        ("d" * 120 + "/" + "k" * 90 + ".txt", b"ustar prefix"),  # fits the ustar prefix field
        ("n" * 150 + ".txt", b"long basename"),
        ("données/ключ.日本.txt", b"utf8"),
    ]
    for fmt in (tarfile.GNU_FORMAT, tarfile.PAX_FORMAT):
        assert read_all(tar_bytes(members, fmt=fmt), how, tmp_path) == members
    ustar_ok = members[:1]
    assert read_all(tar_bytes(ustar_ok, fmt=tarfile.USTAR_FORMAT), how, tmp_path) == ustar_ok


def test_pax_path_and_size_override_header() -> None:
    # A PAX 'x' record renames the next member; tarfile writes 'size' for huge files only,
    # so craft one: header says 3 bytes, PAX says 5.
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tf:
        info = tarfile.TarInfo("short.txt")
        info.size = 5
        info.pax_headers = {"path": "renamed/by.pax.txt"}
        tf.addfile(info, io.BytesIO(b"12345"))
    assert list(iter_tar(io.BytesIO(buf.getvalue()))) == [("renamed/by.pax.txt", b"12345")]

    header = tarfile.TarInfo("x.bin")
    header.size = 5
    header.pax_headers = {"size": "5"}
    raw = bytearray(header.tobuf(tarfile.PAX_FORMAT))
    # the PAX record already carries the size; now make the ustar header lie about it
    ustar = tarfile.TarInfo("x.bin")
    ustar.size = 3
    fake = bytearray(ustar.tobuf(tarfile.USTAR_FORMAT))
    data = bytes(raw[: len(raw) - 512]) + bytes(fake) + b"abcde".ljust(512, b"\0") + bytes(1024)
    assert list(iter_tar(io.BytesIO(data))) == [("x.bin", b"abcde")]


def test_global_pax_header_is_read() -> None:
    data = tar_bytes(MEMBERS[:2], fmt=tarfile.PAX_FORMAT, pax_headers={"comment": "global"})
    assert list(iter_tar(io.BytesIO(data))) == MEMBERS[:2]


def test_non_regular_members_are_skipped() -> None:
    d = tarfile.TarInfo("somedir")
    d.type = tarfile.DIRTYPE
    link = tarfile.TarInfo("link.txt")
    link.type = tarfile.SYMTYPE
    link.linkname = "a.txt"
    data = tar_bytes(MEMBERS[:1], extra=[d, link], fmt=tarfile.GNU_FORMAT)
    assert list(iter_tar(io.BytesIO(data))) == MEMBERS[:1]


@pytest.mark.parametrize("how", HOW)
def test_gzip_shard(tmp_path: object, how: str) -> None:
    assert read_all(gz(tar_bytes(MEMBERS)), how, tmp_path) == MEMBERS


def test_bzip2_and_xz_shards() -> None:
    import bz2
    import lzma

    data = tar_bytes(MEMBERS)
    assert list(iter_tar(io.BytesIO(bz2.compress(data)))) == MEMBERS
    assert list(iter_tar(io.BytesIO(lzma.compress(data)))) == MEMBERS


def test_extra_zero_blocks_at_end_and_concatenated_archives() -> None:
    one = tar_bytes(MEMBERS[:2])
    two = tar_bytes(MEMBERS[2:])
    assert list(iter_tar(io.BytesIO(one + bytes(512 * 20)))) == MEMBERS[:2]
    # Without concatenated=True the reader stops at the first end-of-archive marker ...
    assert list(iter_tar(io.BytesIO(one + two))) == MEMBERS[:2]
    # ... with it, every archive in the stream is read (SageMaker Pipe mode).
    assert list(iter_tar(NoFileno(one + two + one), concatenated=True)) == MEMBERS + MEMBERS[:2]


def test_skip_predicate_does_not_return_skipped_members() -> None:
    data = tar_bytes(MEMBERS)
    got = list(iter_tar(io.BytesIO(data), skip=lambda n: n.endswith(".bin")))
    assert [n for n, _ in got] == ["a.txt", "a.json", "dir.x/b.cls"]


def test_reads_from_a_real_pipe() -> None:
    data = tar_bytes(MEMBERS) * 1
    proc = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdout.buffer.write(sys.stdin.buffer.read())"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    assert proc.stdin is not None and proc.stdout is not None
    feeder = threading.Thread(target=lambda: (proc.stdin.write(data), proc.stdin.close()))  # type: ignore[union-attr]
    feeder.start()
    assert list(iter_tar(proc.stdout)) == MEMBERS
    feeder.join()
    proc.stdout.close()
    assert proc.wait() == 0


# --- bad input ---------------------------------------------------------------------------------


def expect_error(
    data: bytes, how: str, tmp_path: object, *, url: str = "mem://shard.tar"
) -> ShardReadError:
    with pytest.raises(ShardReadError) as info:
        read_all(data, how, tmp_path, url=url)
    err = info.value
    assert isinstance(err, tarfile.ReadError) and isinstance(err, OSError)
    assert isinstance(err, WdsCloudError)
    assert err.url == url and url in str(err)
    return err


@pytest.mark.parametrize("how", HOW)
def test_truncated_member(tmp_path: object, how: str) -> None:
    data = tar_bytes(MEMBERS)
    # cut inside big.bin's data
    big_header = data.index(b"big.bin")
    err = expect_error(data[: big_header + 512 + 10000], how, tmp_path)
    assert err.member == "big.bin" and err.offset == big_header
    assert "truncated member" in str(err) and "big.bin" in str(err)


@pytest.mark.parametrize("how", HOW)
def test_missing_end_marker_at_a_member_boundary_reads_everything(
    tmp_path: object, how: str
) -> None:
    """webdataset's TarWriter left unclosed (the S3 blog post) ends right after a member: every
    member is read and one warning names the offset; a member cut short stays an error."""
    data = tar_bytes(MEMBERS[:2])
    end_of_second = 512 + 512 + 512 + 512  # two headers and their padded data
    warnings: list[tuple[str, int]] = []
    got = read_all(
        data[:end_of_second], how, tmp_path, on_warning=lambda m, o: warnings.append((m, o))
    )
    assert got == MEMBERS[:2]
    assert len(warnings) == 1 and warnings[0][1] == end_of_second
    assert "without the tar end-of-archive marker" in warnings[0][0]
    err = expect_error(data[: end_of_second - 508], how, tmp_path)  # inside a.json's data
    assert "truncated" in str(err) and err.member == "a.json"


def test_missing_end_marker_after_an_extended_header_is_an_error() -> None:
    data = tar_bytes([("x" * 120 + ".txt", b"1")], fmt=tarfile.PAX_FORMAT)
    with pytest.raises(ShardReadError, match="after an extended header") as info:
        list(iter_tar(io.BytesIO(data[:1024])))  # the PAX header and its records, no member
    assert info.value.offset == 1024


@pytest.mark.parametrize("how", HOW)
def test_corrupt_header(tmp_path: object, how: str) -> None:
    data = bytearray(tar_bytes(MEMBERS))
    second = data.index(b"a.json")
    data[second + 130] ^= 0x01  # flip a bit in the size field
    err = expect_error(bytes(data), how, tmp_path)
    assert err.offset == second and "checksum" in str(err)
    assert "a.txt" in str(err)  # names the last good member


@pytest.mark.parametrize("how", HOW)
def test_truncated_header(tmp_path: object, how: str) -> None:
    data = tar_bytes(MEMBERS[:1])
    err = expect_error(data[: 1024 + 100], how, tmp_path)
    assert "truncated tar header" in str(err) and err.offset == 1024


@pytest.mark.parametrize("how", HOW)
def test_not_a_tar_file(tmp_path: object, how: str) -> None:
    err = expect_error(b"PNG\r\n" + os.urandom(3000), how, tmp_path)
    assert "not a tar archive" in str(err) and err.offset == 0


@pytest.mark.parametrize("how", HOW)
def test_empty_file(tmp_path: object, how: str) -> None:
    err = expect_error(b"", how, tmp_path)
    assert "empty" in str(err)


@pytest.mark.parametrize("how", ["bytes", "trickle"])
def test_size_running_past_the_stream_allocates_nothing_huge(tmp_path: object, how: str) -> None:
    info = tarfile.TarInfo("huge.bin")
    info.size = 1 << 40  # a terabyte claimed, a few bytes present
    data = info.tobuf(tarfile.GNU_FORMAT) + b"x" * 100
    err = expect_error(data, how, tmp_path)
    assert err.member == "huge.bin" and "1099511627776" in str(err)


def test_size_running_past_a_mapped_file(tmp_path: object) -> None:
    info = tarfile.TarInfo("huge.bin")
    info.size = 1 << 40
    err = expect_error(info.tobuf(tarfile.GNU_FORMAT) + b"x" * 100, "file", tmp_path)
    assert err.member == "huge.bin"


def test_truncated_gzip_stream() -> None:
    data = gz(tar_bytes(MEMBERS))
    with pytest.raises(ShardReadError) as info:
        list(iter_tar(io.BytesIO(data[: len(data) // 2]), url="u.tgz"))
    assert info.value.url == "u.tgz"


def test_stream_errors_become_shard_read_errors() -> None:
    class Broken(io.RawIOBase):
        def __init__(self) -> None:
            self.calls = 0

        def readable(self) -> bool:
            return True

        def readinto(self, b: bytearray) -> int:  # type: ignore[override]
            self.calls += 1
            if self.calls > 1:
                raise ConnectionResetError("peer reset")
            data = tar_bytes(MEMBERS)[:600]
            b[: len(data)] = data
            return len(data)

    with pytest.raises(ShardReadError, match="peer reset") as info:
        list(iter_tar(Broken(), url="http://h/x.tar", bufsize=600))
    assert info.value.url == "http://h/x.tar"


def test_padding_past_the_buffer_end_after_a_large_member() -> None:
    """Regression: after a member larger than the buffer, buffer ends are not 512-aligned;
    a later member whose data ends inside the buffer but whose padding runs past it must not
    shift the reader (it used to fail with a header checksum mismatch)."""
    import random

    rng = random.Random(0)
    for _ in range(60):
        members = [("big.bin", bytes([7]) * (3 * 4096 + rng.randrange(1, 512)))]
        members += [(f"{i:04d}.bin", bytes([i % 251]) * rng.randrange(1, 1500)) for i in range(40)]
        data = tar_bytes(members)
        for stream in (io.BytesIO(data), NoFileno(data, step=777)):
            got = list(iter_tar(stream, bufsize=4096))
            assert got == members


@pytest.mark.parametrize("how", ["file", "stream"])
def test_lone_zero_block_is_read_past_and_reported(tmp_path: object, how: str) -> None:
    members = [("a.txt", b"1" * 10), ("b.txt", b"2" * 10), ("c.txt", b"3" * 10)]
    raw = tar_bytes(members)
    data = raw[:1024] + bytes(512) + raw[1024:]  # a zero block after the first member
    warnings: list[tuple[str, int]] = []
    if how == "file":
        stream = open(write(os.path.join(str(tmp_path), "lone.tar"), data), "rb")
    else:
        stream = NoFileno(data, step=100)
    with stream:
        got = list(iter_tar(stream, on_warning=lambda m, o: warnings.append((m, o))))
    assert got == members
    assert warnings == [("lone zero block inside the archive; reading on", 1024)]
    # Two zero blocks still end the archive (what follows is not read), with no warning.
    ended = raw[:1024] + bytes(1024) + raw[1024:]
    warnings.clear()
    assert list(iter_tar(io.BytesIO(ended), on_warning=lambda m, o: warnings.append((m, o)))) == [
        members[0]
    ]
    assert warnings == []


# --- found by the differential tests (tests/core/test_tar_differential.py) ----------------------


def _with_header_field(data: bytes, offset: int, start: int, value: bytes) -> bytes:
    """``data`` with ``value`` written at ``start`` of the header at ``offset``, checksum redone."""
    header = bytearray(data[offset : offset + 512])
    header[start : start + len(value)] = value
    header[148:156] = b" " * 8
    header[148:156] = b"%06o\0 " % sum(header)
    return data[:offset] + bytes(header) + data[offset + 512 :]


def _reference(data: bytes) -> list[tuple[str, bytes]]:
    with tarfile.open(fileobj=io.BytesIO(data)) as tf:
        return [(m.name, tf.extractfile(m).read()) for m in tf if m.isreg()]  # type: ignore[union-attr]


@pytest.mark.parametrize("how", HOW)
@pytest.mark.parametrize(
    "encode",
    [
        lambda n: b"%012o" % n,  # twelve digits, no terminator (libarchive's non-strict form)
        lambda n: b"%011o " % n,
        lambda n: b"%11o\0" % n,
        lambda n: (b"%o" % n).ljust(12, b"\0"),
        lambda n: b"\x80" + n.to_bytes(11, "big"),
    ],
    ids=["12-digits", "space", "space-padded", "short", "base-256"],
)
def test_size_field_encodings_of_other_writers(tmp_path: object, how: str, encode: object) -> None:
    """A 12-digit size field was read as its first 11 digits (668 -> 83): the member's data
    came back short and the next header was read from the middle of it."""
    members = [("a.bin", bytes(range(256)) * 2 + b"x" * 156), ("b.txt", b"after")]
    data = _with_header_field(tar_bytes(members), 0, 124, encode(668))  # type: ignore[operator]
    assert _reference(data) == members
    assert read_all(data, how, tmp_path) == members


@pytest.mark.parametrize("how", HOW)
def test_size_field_of_a_fifo_is_not_data(tmp_path: object, how: str) -> None:
    """POSIX: FIFOs, like devices and links, store no data whatever the size field says;
    tarfile ignores it (GNU tar does not). A FIFO was read as if 700 bytes followed it."""
    fifo = tarfile.TarInfo("pipe")
    fifo.type = tarfile.FIFOTYPE
    raw = tar_bytes(MEMBERS[:2], extra=[fifo])
    data = _with_header_field(raw, 0, 124, b"%011o\0" % 700)
    assert _reference(data) == MEMBERS[:2]
    assert read_all(data, how, tmp_path) == MEMBERS[:2]


@pytest.mark.parametrize("how", HOW)
def test_solaris_extended_header_is_read_like_pax(tmp_path: object, how: str) -> None:
    """Solaris tar's ``X`` extended header has the PAX layout; tarfile and GNU tar apply it."""
    name = "long/" + "n" * 120 + ".txt"
    raw = tar_bytes([(name, b"data"), ("b.txt", b"b")], fmt=tarfile.PAX_FORMAT)
    assert raw[156:157] == b"x"
    data = _with_header_field(raw, 0, 156, b"X")
    assert _reference(data) == [(name, b"data"), ("b.txt", b"b")]
    assert read_all(data, how, tmp_path) == [(name, b"data"), ("b.txt", b"b")]


@pytest.mark.parametrize("bufsize", [0, 1, 100, 511])
def test_buffer_sizes_below_one_block_read_whole_archives(bufsize: int) -> None:
    """A buffer smaller than a header block made the first refill look like a truncated
    header ("truncated tar header: 100 bytes at the end of the stream") on a valid shard."""
    data = tar_bytes(MEMBERS)
    assert list(iter_tar(io.BytesIO(data), bufsize=bufsize)) == MEMBERS
    assert list(iter_tar(NoFileno(data, step=77), bufsize=bufsize)) == MEMBERS
