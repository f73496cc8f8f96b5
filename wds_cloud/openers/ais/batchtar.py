"""The TAR stream of an AIStore GetBatch answer, parsed member by member from a body.

AIStore's streaming GetBatch (``/v1/ml/moss`` with ``"strm": true``) answers with one TAR
archive, one regular member per requested entry, in the order asked. The archive is written
by Go's ``archive/tar``: USTAR headers, a PAX extended header (``x``) before a member whose
name does not fit (long object names), and the two zero blocks at the end. This reader takes
those and, for robustness, the other forms of long names (USTAR ``prefix``, GNU ``L``), PAX
``size`` and base-256 sizes; global PAX headers (``g``) are read and ignored, and members that
are not regular files (directories, links) are skipped.

The openers layer cannot use :mod:`wds_cloud.core.tar` (it sits above), and this reader needs
less: names and bytes, from a body that gives at most one socket read per call
(:class:`~wds_cloud.openers.streams.resumable.Body`), so a connection that drops loses no
complete member.
"""

from __future__ import annotations

from wds_cloud.openers.streams.resumable import Body

__all__ = ["BLOCK", "BatchTarError", "TarMemberReader", "TruncatedArchive"]

BLOCK = 512
_ZERO_BLOCK = bytes(BLOCK)
_READ = 256 * 1024  # the most one read1 asks for while filling the buffer
_REGULAR = (b"0", b"\0", b"7")
_SKIPPED_META = (b"K",)  # GNU long link name: not needed for regular members


class BatchTarError(ValueError):
    """The answer is not a TAR archive AIStore would write (bad checksum, bad number).

    Attributes:
        offset: byte offset in the answer of the header at fault.
    """

    def __init__(self, message: str, offset: int) -> None:
        super().__init__(f"{message} (byte {offset} of the GetBatch answer)")
        self.offset = offset


class TruncatedArchive(ConnectionError):
    """The answer ended before the archive's end (a dropped connection, most likely)."""


def _number(field: bytes, what: str, offset: int) -> int:
    """A numeric header field: octal digits (NUL/space padded) or GNU base-256."""
    if field and field[0] & 0x80:
        value = int.from_bytes(field[1:], "big")
        if field[0] & 0x40:  # negative base-256
            raise BatchTarError(f"negative {what} in a TAR header", offset)
        return value
    text = field.strip(b"\0 ")
    if not text:
        return 0
    try:
        return int(text, 8)
    except ValueError:
        raise BatchTarError(f"bad {what} {field!r} in a TAR header", offset) from None


def _checksum_ok(header: bytes) -> bool:
    stored = header[148:156].strip(b"\0 ")
    try:
        expected = int(stored, 8)
    except ValueError:
        return False
    unsigned = sum(header[:148]) + 8 * 32 + sum(header[156:])
    if expected == unsigned:
        return True
    signed = sum(b - 256 if b > 127 else b for b in header[:148] + b" " * 8 + header[156:])
    return expected == signed


def _pax_records(data: bytes, offset: int) -> dict[str, str]:
    """The ``"<len> <key>=<value>\\n"`` records of a PAX header."""
    records: dict[str, str] = {}
    pos = 0
    while pos < len(data):
        if data[pos] == 0:  # padding some writers leave after the records
            break
        space = data.find(b" ", pos)
        try:
            length = int(data[pos:space])
        except ValueError:
            raise BatchTarError("bad PAX record length", offset) from None
        record = data[space + 1 : pos + length]
        if length <= 0 or not record.endswith(b"\n") or b"=" not in record:
            raise BatchTarError("bad PAX record", offset)
        key, _, value = record[:-1].partition(b"=")
        records[key.decode("utf-8", "replace")] = value.decode("utf-8", "surrogateescape")
        pos += length
    return records


class TarMemberReader:
    """Regular members of a TAR stream: :meth:`next_member` gives ``(name, data)`` in order.

    Args:
        body: the answer's body (``read1(n)``: at most one socket read, ``b""`` at its end).

    Attributes:
        offset: bytes of the answer consumed so far (the start of the next header).
    """

    def __init__(self, body: Body) -> None:
        self._body = body
        self._buf = bytearray()
        self._pos = 0
        self.offset = 0

    def _fill(self, n: int) -> bool:
        """Make ``n`` unread bytes available; False when the body ended first."""
        while len(self._buf) - self._pos < n:
            if self._pos:
                del self._buf[: self._pos]
                self._pos = 0
            chunk = self._body.read1(max(n - len(self._buf), _READ))
            if not chunk:
                return False
            self._buf += chunk
        return True

    def _take(self, n: int, what: str) -> bytes:
        """The next ``n`` bytes of the answer.

        Raises:
            TruncatedArchive: the body ended before them.
        """
        avail = len(self._buf) - self._pos
        if n <= avail:
            data = bytes(self._buf[self._pos : self._pos + n])
            self._pos += n
        else:  # large data: what is buffered, then the body's reads, joined once
            parts = [bytes(self._buf[self._pos :])]
            del self._buf[:]
            self._pos = 0
            need = n - avail
            while need:
                chunk = self._body.read1(min(need, 1 << 20))
                if not chunk:
                    raise TruncatedArchive(
                        f"the GetBatch answer ended inside {what} at byte "
                        f"{self.offset + n - need} (a dropped connection)"
                    )
                if len(chunk) > need:  # a body that gave more than asked: keep the rest
                    self._buf += chunk[need:]
                    chunk = chunk[:need]
                parts.append(chunk)
                need -= len(chunk)
            data = b"".join(parts)
        self.offset += n
        return data

    def _block(self, what: str) -> bytes | None:
        """The next 512-byte block, or None when the body ended exactly here."""
        if not self._fill(BLOCK):
            if len(self._buf) == self._pos:
                return None
            raise TruncatedArchive(
                f"the GetBatch answer ended inside {what} at byte "
                f"{self.offset + len(self._buf) - self._pos} (a dropped connection)"
            )
        return self._take(BLOCK, what)

    def _data(self, size: int, what: str) -> bytes:
        data = self._take(size, what)
        pad = -size % BLOCK
        if pad:
            self._take(pad, what)
        return data

    def next_member(self) -> tuple[str, bytes] | None:
        """The next regular member's name and bytes; None at the end of the archive.

        Raises:
            TruncatedArchive: the body ended before the archive's end (no end blocks).
            BatchTarError: a header is malformed.
        """
        long_name: str | None = None
        pax: dict[str, str] = {}
        while True:
            at = self.offset
            header = self._block("a TAR header")
            if header is None:
                raise TruncatedArchive(
                    f"the GetBatch answer ended at byte {at} without the archive's end blocks "
                    "(a dropped connection)"
                )
            if header == _ZERO_BLOCK:
                return None
            if not _checksum_ok(header):
                raise BatchTarError("TAR header checksum mismatch", at)
            kind = header[156:157]
            size = _number(header[124:136], "size", at)
            if "size" in pax and kind not in (b"x", b"g"):
                size = int(pax["size"])
            what = f"the member at byte {at}"
            if kind == b"x":
                pax.update(_pax_records(self._data(size, what), at))
                continue
            if kind == b"g":
                self._data(size, what)
                continue
            if kind == b"L":
                long_name = self._data(size, what).rstrip(b"\0").decode("utf-8", "surrogateescape")
                continue
            if kind in _SKIPPED_META:
                self._data(size, what)
                continue
            data = self._data(size, what)
            if kind not in _REGULAR:
                long_name, pax = None, {}
                continue
            return self._name(header, long_name, pax), data

    @staticmethod
    def _name(header: bytes, long_name: str | None, pax: dict[str, str]) -> str:
        if "path" in pax:
            return pax["path"]
        if long_name is not None:
            return long_name
        name = header[:100].split(b"\0", 1)[0]
        if header[257:263] == b"ustar\0":  # POSIX: a prefix field joins the name
            prefix = header[345:500].split(b"\0", 1)[0]
            if prefix:
                name = prefix + b"/" + name
        return name.decode("utf-8", "surrogateescape")
