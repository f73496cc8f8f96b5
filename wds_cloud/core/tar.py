"""A streaming tar reader built for WebDataset shards.

Reads ustar, GNU (long names ``L``/``K``) and POSIX/PAX (``x``, ``g``, and Solaris ``X``:
``path`` and ``size`` override the header) archives, compressed with gzip, bzip2 or xz or not,
from any binary stream.
Regular files of local shards are memory-mapped and sliced; other streams are read in large
blocks. Memory stays bounded by the largest member: the whole shard is never held.

Every header checksum is verified. Bad input raises :class:`~wds_cloud.errors.ShardReadError`
carrying the URL, the byte offset of the offending header in the (uncompressed) stream and the
member name; there is no hang and no allocation beyond a member's declared size.

Header fields live in :mod:`wds_cloud.core.tarheader`, the byte source (mmap, buffered stream,
decompression) in :mod:`wds_cloud.core.tarsource`; this module holds the parse loop.

Why not :mod:`tarfile`: it builds a ``TarInfo`` object per header and costs tens of µs a member
in streaming mode; this reader costs a few µs (``benchmarks/bench_core.py``, docs/benchmarks.md).
"""

from __future__ import annotations

import logging
import zlib
from collections.abc import Callable, Iterator
from typing import IO, TYPE_CHECKING, Any

from wds_cloud.core.tarheader import (
    BLOCK,
    CHECKSUM_FIELDS,
    REGULAR,
    ZERO_BLOCK,
    checksum_ok,
    decode_name,
    octal,
    parse_pax,
)
from wds_cloud.core.tarsource import DONTNEED_STEP, PREAD_MIN, READ_CHUNK, TarSource
from wds_cloud.errors import ShardReadError
from wds_cloud.redact import redact_url

if TYPE_CHECKING:
    from wds_cloud.openers.streams.stream import ReadStream

DEFAULT_BUFSIZE = 4 << 20
_EXTENDED = frozenset(b"xXL")  # headers that describe the member after them
# links, devices, directories, FIFOs: the size field is not data (POSIX; tarfile agrees)
_NO_DATA = frozenset(b"123456")

Member = tuple[str, bytes]
Skip = Callable[[str], bool]
#: Receives ``(message, offset)`` for an oddity the reader reads past (a lone zero block).
Warn = Callable[[str, int], None]

log = logging.getLogger(__name__)


def _log_warning(url: str | None) -> Warn:
    """The default ``on_warning``: one WARNING log line naming the URL and the offset."""

    def warn(message: str, offset: int) -> None:
        log.warning("%s [url=%r, offset=%d]", message, redact_url(url or ""), offset)

    return warn


def iter_tar(
    stream: ReadStream | IO[bytes],
    *,
    url: str | None = None,
    concatenated: bool = False,
    skip: Skip | None = None,
    bufsize: int = DEFAULT_BUFSIZE,
    on_warning: Warn | None = None,
    zero_copy: bool = False,
) -> Iterator[Member]:
    """Yield ``(name, data)`` for every regular file in a tar stream.

    Args:
        stream: a binary stream positioned at the start of the archive (plain, gzip, bzip2 or
            xz; detected from the first bytes). Regular files are memory-mapped.
        url: the shard URL, for error messages.
        concatenated: keep reading after an end-of-archive marker, for several archives sent
            back to back (SageMaker Pipe mode); stops at the end of the stream.
        skip: called with each member name; True skips the member without copying its data.
        bufsize: block size of reads from non-file streams (at least 512: smaller values
            read 512).
        on_warning: called with ``(message, offset)`` for what the reader reads past instead
            of failing: a lone zero block followed by a valid header (GNU tar warns about it;
            ``tarfile`` and webdataset silently stop there and lose the rest), and a stream that
            ends at a member boundary without the end-of-archive marker. Default: a ``logging``
            warning naming the URL and offset.
        zero_copy: yield each member's data as a read-only ``memoryview`` instead of ``bytes``:
            a view of the mapped file (local files), of the read block it lies in, or of a
            buffer of its own (a member larger than the block, read straight into it). Views
            never change and stay valid as long as they are referenced, after the iterator is
            closed too (a mapping with live views is unmapped when the last is released);
            holding one keeps its mapping or block (``bufsize``) in memory. See
            docs/pipeline.md, "Zero-copy members".

    Raises:
        ShardReadError: not a tar archive, a corrupt header, a truncated member or header.
            A stream that ends at a member boundary without the end-of-archive marker is read
            in full and reported through ``on_warning``. The error carries ``url``, ``offset`` (of
            the member's header in the uncompressed stream) and ``member``.
    """
    return _read(stream, url, bufsize, on_warning, concatenated, skip, True, False, zero_copy)


#: ``(name, offset of the data in the uncompressed stream, size)`` of one regular member.
Entry = tuple[str, int, int]


def iter_tar_entries(
    stream: ReadStream | IO[bytes],
    *,
    url: str | None = None,
    bufsize: int = DEFAULT_BUFSIZE,
    on_warning: Warn | None = None,
) -> Iterator[Entry]:
    """Yield ``(name, data offset, size)`` for every regular file, without copying data.

    The same reader as :func:`iter_tar` (same members, names, errors and warnings); the offset
    is where the member's data starts in the uncompressed archive (``tarfile``'s
    ``offset_data``: after the member's own header and any extended headers before it). Shard
    indexes are built from this.

    Raises:
        ShardReadError: as :func:`iter_tar`.
    """
    return _read(stream, url, bufsize, on_warning, False, None, False)


def iter_tar_positions(
    stream: ReadStream | IO[bytes],
    *,
    url: str | None = None,
    concatenated: bool = False,
    skip: Skip | None = None,
    bufsize: int = DEFAULT_BUFSIZE,
    on_warning: Warn | None = None,
    zero_copy: bool = False,
) -> Iterator[tuple[str | None, bytes | memoryview, int]]:
    """Yield ``(name, data, first header offset)`` for every regular file, then
    ``(None, b"", end)`` where ``end`` is the offset of the end-of-archive marker (or of the end
    of the stream when it has none).

    The first header offset is that of the first header describing the member (a PAX or GNU
    long-name header before it, else its own). Offsets are in the uncompressed stream, counted
    from the stream's first byte (a local file opened and positioned at ``n``: from the file's
    start). Every sample reader groups these (:func:`wds_cloud.core.samples.group_members`),
    and resumable reading ties samples to the positions. ``concatenated``: as in
    :func:`iter_tar` (the end entry then comes at the end of the stream); ``zero_copy``: as in
    :func:`iter_tar`.

    Raises:
        ShardReadError: as :func:`iter_tar`.
    """
    return _read(stream, url, bufsize, on_warning, concatenated, skip, True, True, zero_copy)


def _read(
    stream: ReadStream | IO[bytes],
    url: str | None,
    bufsize: int,
    on_warning: Warn | None,
    concatenated: bool,
    skip: Skip | None,
    copy: bool,
    positions: bool = False,
    zero_copy: bool = False,
) -> Iterator[Any]:
    """The generator behind the three readers (returned, not delegated to: no extra layer per
    member): the byte source opened at the first ``next()`` and closed with the generator."""
    source = TarSource(stream, url, bufsize)
    if on_warning is None:
        on_warning = _log_warning(url)
    try:
        yield from _members(source, url, concatenated, skip, on_warning, copy, positions, zero_copy)
    finally:
        source.close()


# The per-header loop below is deliberately one long function with its helpers bound to locals:
# it runs once per member, and calls and attribute lookups here are most of a small shard's cost.
def _members(
    source: TarSource,
    url: str | None,
    concatenated: bool,
    skip: Skip | None,
    warn: Warn,
    copy: bool,
    positions: bool = False,
    zero_copy: bool = False,
) -> Iterator[Any]:
    """Regular members as ``(name, data)``, or as ``(name, data offset, size)`` when ``copy``
    is False (their data is then skipped, never copied), or as ``(name, data, first header
    offset)`` followed by ``(None, b"", end of archive)`` when ``positions`` is True.

    Each member's bytes are copied once at most: a slice of the mapping or of the read block,
    a ``pread`` of a large member of a mapped file, or one join of the pieces of a member
    larger than the block. ``zero_copy``: regular
    members' data as read-only memoryviews (no copy; see :func:`iter_tar`)."""
    mapped = source.mm is not None
    fields_get = CHECKSUM_FIELDS.get
    adler32 = zlib.adler32
    buf = source.buf
    pos = source.start if mapped else 0
    buflen = len(buf)
    pending: dict[str, str] = {}
    global_pax: dict[str, str] = {}
    long_name: str | None = None
    seen_end = False
    at_start = True
    name = ""
    typeflag = 0  # of the last header read
    chain = -1  # first header offset of the member being described (positions mode)
    data: Any  # bytes, or a memoryview of a regular member with zero_copy
    while True:
        if buflen - pos < BLOCK:
            if not mapped:
                pos = source.refill(pos)
                buf = source.buf
                buflen = len(buf)
            if buflen - pos < BLOCK:
                if buflen - pos:
                    raise ShardReadError(
                        f"truncated tar header: {buflen - pos} bytes at the end of the stream",
                        url=url,
                        offset=source.base + pos,
                    )
                if at_start:
                    raise ShardReadError("empty file: not a tar archive", url=url, offset=0)
                if seen_end:  # concatenated archives: the stream ends after a marker
                    if positions:
                        yield None, b"", source.base + pos
                    return
                if typeflag in _EXTENDED:
                    raise ShardReadError(
                        "the stream ended after an extended header, before its member; the "
                        "shard is truncated",
                        url=url,
                        offset=source.base + pos,
                    )
                # Ended at a member boundary: complete in practice (webdataset's TarWriter left
                # unclosed writes such shards; GNU tar reads them). Read in full, warn once.
                warn(
                    "the stream ended at a member boundary without the tar end-of-archive "
                    "marker (was the writer closed?); every member was read"
                    + (f", the last is {name!r}" if name else ""),
                    source.base + pos,
                )
                if positions:
                    yield None, b"", source.base + pos
                return
        header = buf[pos : pos + BLOCK]
        if header == ZERO_BLOCK:
            if not concatenated:
                # End of archive, unless a valid header follows this one zero block.
                if buflen - pos < 2 * BLOCK and not mapped:
                    pos = source.refill(pos)
                    buf = source.buf
                    buflen = len(buf)
                after = buf[pos + BLOCK : pos + 2 * BLOCK]
                if len(after) == BLOCK and after != ZERO_BLOCK and checksum_ok(after):
                    warn("lone zero block inside the archive; reading on", source.base + pos)
                    pos += BLOCK
                    continue
            seen_end = True
            if not concatenated:
                if positions:
                    yield None, b"", source.base + pos
                return
            pos += BLOCK
            continue
        header_offset = source.base + pos
        if chain < 0:
            chain = header_offset
        # Inline fast path of checksum_ok (see there): cached field + two Adler-32 sums.
        field = fields_get(header[148:156])
        if (
            field is None
            or (adler32(header[:256]) & 0xFFFF) + (adler32(header[256:]) & 0xFFFF) + 254 - field[1]
            != field[0]
        ) and not checksum_ok(header):
            what = "not a tar archive" if at_start else "corrupt tar header"
            raise ShardReadError(
                f"{what}: header checksum mismatch"
                + (f" (after member {name!r})" if name and not at_start else ""),
                url=url,
                offset=header_offset,
            )
        at_start = False
        seen_end = False
        typeflag = header[156]
        try:
            # 11 digits and a terminator (tarfile, GNU tar); a 12th digit in place of the
            # terminator (libarchive, members of 8 to 64 GiB) or base-256: the whole field.
            size = int(header[124:135], 8) if header[135] <= 32 else octal(header[124:136])
        except ValueError:
            try:
                size = octal(header[124:136])
            except ValueError:
                raise ShardReadError(
                    f"bad size field {header[124:136]!r}", url=url, offset=header_offset
                ) from None
        if long_name is not None:
            name = long_name
            long_name = None
        else:
            end = header.find(b"\x00", 0, 100)
            raw = header[:end] if end >= 0 else header[:100]
            if header[345] and header[257:265] == b"ustar\x0000":
                end = header.find(b"\x00", 345, 500)
                raw = header[345 : end if end >= 0 else 500] + b"/" + raw
            try:
                name = raw.decode("utf-8")
            except UnicodeDecodeError:
                name = raw.decode("utf-8", "surrogateescape")
        if pending or global_pax:
            overrides = {**global_pax, **pending} if global_pax else pending
            pending = {}
            if "path" in overrides:
                name = overrides["path"]
            if "size" in overrides:
                try:
                    size = int(overrides["size"])
                except ValueError:
                    raise ShardReadError(
                        f"bad PAX size {overrides['size']!r}",
                        url=url,
                        offset=header_offset,
                        member=name,
                    ) from None
        if typeflag in _NO_DATA:
            size = 0
        if size < 0:
            raise ShardReadError(
                f"negative member size {size}", url=url, offset=header_offset, member=name
            )
        start = pos + BLOCK
        padded = (size + 511) & ~511
        regular = typeflag in REGULAR
        if regular and skip is not None and skip(name):
            regular = False
        wanted = (regular and copy) or typeflag in b"xgLKX"
        if start + size <= buflen:
            if wanted and not zero_copy and size < PREAD_MIN:
                data = buf[start : start + size]
            elif not wanted:
                data = b""
            elif zero_copy and regular:
                # buf is a mapping or an immutable block never written again: a safe view
                data = memoryview(buf)[start : start + size].toreadonly()
            elif mapped:
                data = source.pread(start, size)
            else:
                data = buf[start : start + size]
            pos = start + padded
            if mapped:
                if pos > buflen:
                    pos = buflen  # the last member's padding may be cut; the check below catches a missing end
                if pos - source.released >= DONTNEED_STEP:
                    source.release(pos)
        elif mapped:
            raise ShardReadError(
                f"truncated member: header declares {size} bytes but the file ends "
                f"{buflen - start} bytes after it",
                url=url,
                offset=header_offset,
                member=name,
            )
        else:
            data, pos = _take_large(
                source, start, size, padded, wanted, zero_copy and regular, url, header_offset, name
            )
            buf = source.buf
            buflen = len(buf)
        if regular:
            if positions:
                yield name, data, chain
            else:
                yield (name, data) if copy else (name, header_offset + BLOCK, size)
            chain = -1
        elif typeflag == 0x78 or typeflag == 0x58:  # 'x' PAX / 'X' Solaris: for the next member
            # webdataset's TarWriter puts an mtime-only PAX header before every member: only
            # parse when a record can change what we read.
            if b"path=" in data or b"size=" in data:
                pending = parse_pax(data, url, header_offset)
        elif typeflag == 0x67:  # 'g': global PAX header
            records = parse_pax(data, url, header_offset)
            records.pop("path", None)  # a global path would rename every member; ignore it
            global_pax.update(records)
            chain = -1
        elif typeflag == 0x4C:  # 'L': GNU long name of the next member
            long_name = decode_name(data.split(b"\x00", 1)[0])
        elif typeflag == 0x53:  # 'S': GNU sparse
            raise ShardReadError(
                "GNU sparse members are not supported", url=url, offset=header_offset, member=name
            )
        else:
            chain = -1  # a directory, a link, a skipped member: not part of the next member


def _take_large(
    source: TarSource,
    start: int,
    size: int,
    padded: int,
    wanted: bool,
    view: bool,
    url: str | None,
    offset: int,
    name: str,
) -> tuple[bytes | memoryview, int]:
    """Read a member that runs past the buffered block; return (data, new position).

    Copies: ``bytes`` are one join of the buffered head and the pieces read (one copy);
    ``view`` (zero-copy) reads the rest straight into a buffer of the member's size (only the
    buffered head is copied) and returns a read-only view of it.
    """
    buf = source.buf
    head = memoryview(buf)[start:]
    need = size - len(head)
    if view:
        out = bytearray(size)
        whole = memoryview(out)
        whole[: len(head)] = head
        got = source.read_into(whole[len(head) :])
        data: bytes | memoryview = whole.toreadonly()
    else:
        parts: list[Any] = [head]
        got = 0
        while got < need:
            chunk = source.read_some(min(need - got, READ_CHUNK))
            if not chunk:
                break
            got += len(chunk)
            if wanted:
                parts.append(chunk)
        data = b"".join(parts) if wanted else b""
    head.release()
    if got < need:
        raise ShardReadError(
            f"truncated member: header declares {size} bytes, the stream ended after "
            f"{size - need + got}",
            url=url,
            offset=offset,
            member=name,
        )
    # Continue with a fresh block that starts with the padding: reading padding + bufsize keeps
    # block ends 512-aligned, so that refills rarely have a partial header to carry over.
    source.base += len(buf) + need
    pad = padded - size
    source.buf = source.read(pad + source.bufsize)
    return data, min(pad, len(source.buf))  # padding cut at the end: the end check reports it
