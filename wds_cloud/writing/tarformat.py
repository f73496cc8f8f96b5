"""Sample formatting for :class:`~wds_cloud.writing.tarwriter.TarWriter`: encoding,
validation, and the ustar/PAX header bytes of each member (no I/O here).

Headers are written here, not by :mod:`tarfile`: plain ustar with an integer ``mtime``, fixed
owner/mode, members of a sample in sorted field order. A PAX ``x`` header is added only when a
member needs one: a name that is not ASCII, a name longer than 100 bytes that cannot be split
into ustar ``prefix``/``name`` fields, or a member of 8 GiB or more.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from wds_cloud.errors import ConfigError, SampleError
from wds_cloud.writing.encoders import BYTES_TYPES, SampleEncoder, make_encoder

__all__ = ["BLOCK", "DEFAULT_MTIME", "FormattedSample", "SampleFormatter"]

BLOCK = 512
#: Default member mtime: 2000-01-01T00:00:00Z. Any fixed integer keeps output reproducible.
DEFAULT_MTIME = 946_684_800
_MAX_OCTAL_11 = 8**11  # sizes and mtimes must be below this to fit ustar's 11 octal digits
_PAX_NAME = b"././@PaxHeader"


class FormattedSample(NamedTuple):
    """A sample turned into tar bytes, ready to write.

    Attributes:
        chunks: headers, member data and padding, in order.
        size: total bytes of ``chunks`` (uncompressed tar bytes this sample occupies).
        names: the member names.
        offsets: where each member's data starts, counted from the sample's first byte.
        sizes: each member's data size.
    """

    chunks: list[Any]
    size: int
    names: list[str]
    offsets: tuple[int, ...] = ()
    sizes: tuple[int, ...] = ()


def _octal(value: int, width: int) -> bytes:
    return b"%0*o\0" % (width - 1, value)


def _field(text: str, width: int, what: str) -> bytes:
    try:
        raw = text.encode("ascii")
    except UnicodeEncodeError:
        raise ConfigError(f"{what} must be ASCII, got {text!r}")
    if len(raw) >= width:
        raise ConfigError(f"{what} must be shorter than {width} bytes, got {text!r}")
    return raw.ljust(width, b"\0")


def _split_ustar(raw: bytes) -> tuple[bytes, bytes] | None:
    """Split a long name at a ``/`` into (prefix <= 155 bytes, name <= 100 bytes), if possible."""
    pos = raw.find(b"/")
    while 0 <= pos <= 155:
        if pos > 0 and 0 < len(raw) - pos - 1 <= 100:
            return raw[:pos], raw[pos + 1 :]
        pos = raw.find(b"/", pos + 1)
    return None


def _pax_record(keyword: str, value: str) -> bytes:
    body = b" " + keyword.encode("ascii") + b"=" + value.encode("utf-8") + b"\n"
    length = len(body) + 1
    while length != len(body) + len(str(length)):
        length = len(body) + len(str(length))
    return str(length).encode("ascii") + body


def _padding(size: int) -> bytes:
    return bytes(-size % BLOCK)


class SampleFormatter:
    """Turns samples into tar bytes: encoding, validation, ustar/PAX headers.

    Args:
        encoder: see :func:`~wds_cloud.writing.encoders.make_encoder`.
        keep_meta: also write fields starting with ``_`` (their values must be str or bytes).
        user: ``uname`` of every member (ASCII, < 32 bytes).
        group: ``gname`` of every member.
        mode: permission bits of every member.
        mtime: modification time of every member, seconds since the epoch (an int).
    """

    def __init__(
        self,
        *,
        encoder: Any = True,
        keep_meta: bool = False,
        user: str = "bigdata",
        group: str = "bigdata",
        mode: int = 0o444,
        mtime: int | float | None = DEFAULT_MTIME,
    ) -> None:
        self.encode: SampleEncoder = make_encoder(encoder)
        self.keep_meta = keep_meta
        if mtime is None:
            mtime = DEFAULT_MTIME
        mtime = int(mtime)
        if not 0 <= mtime < _MAX_OCTAL_11:
            raise ConfigError(f"mtime must be an integer in [0, 8**11), got {mtime}")
        if not 0 <= mode <= 0o7777777:
            raise ConfigError(f"mode must fit 7 octal digits, got {mode:o}")
        self._middle = _octal(mode, 8) + _octal(0, 8) + _octal(0, 8)  # mode, uid, gid
        self._mtime = _octal(mtime, 12)
        tail = (
            b"0"  # typeflag: regular file
            + bytes(100)  # linkname
            + b"ustar\x0000"  # magic + version (POSIX ustar)
            + _field(user, 32, "user")
            + _field(group, 32, "group")
            + _octal(0, 8)  # devmajor
            + _octal(0, 8)  # devminor
        )
        self._tail = tail
        self._pax_tail = b"x" + tail[1:]
        self._tail_sum = sum(tail)
        self._const_sum = sum(self._middle) + sum(self._mtime) + 8 * 32

    def _block(self, name: bytes, size: int, prefix: bytes, tail: bytes) -> bytes:
        size_f = _octal(size, 12)
        # NUL padding adds nothing to the checksum, so sum the meaningful bytes only
        checksum = self._const_sum + (self._tail_sum if tail is self._tail else sum(tail))
        checksum += sum(name) + sum(size_f) + (sum(prefix) if prefix else 0)
        return b"".join(
            (
                name.ljust(100, b"\0"),
                self._middle,
                size_f,
                self._mtime,
                b"%06o\0 " % checksum,
                tail,
                prefix.ljust(155, b"\0"),
                bytes(12),
            )
        )

    def header(self, name: str, size: int) -> bytes:
        """The header block(s) for a regular member: ustar, preceded by PAX only if needed."""
        pax: list[bytes] = []
        prefix = b""
        try:
            raw = name.encode("ascii")
        except UnicodeEncodeError:
            pax.append(_pax_record("path", name))
            raw = name.encode("ascii", "replace")[:100]
        else:
            if len(raw) > 100:
                split = _split_ustar(raw)
                if split is None:
                    pax.append(_pax_record("path", name))
                    raw = raw[:100]
                else:
                    prefix, raw = split
        ustar_size = size
        if size >= _MAX_OCTAL_11:
            pax.append(_pax_record("size", str(size)))
            ustar_size = 0
        block = self._block(raw, ustar_size, prefix, self._tail)
        if not pax:
            return block
        records = b"".join(pax)
        pax_block = self._block(_PAX_NAME, len(records), b"", self._pax_tail)
        return pax_block + records + _padding(len(records)) + block

    def format(self, sample: Mapping[str, Any]) -> FormattedSample:
        """Encode and lay out one sample.

        Raises:
            SampleError: no or bad ``__key__``, a field that cannot be encoded, a bad field
                name, or two fields that differ only in case.
        """
        if not isinstance(sample, Mapping):
            raise SampleError(f"a sample must be a dict, got {type(sample).__name__}")
        key = sample.get("__key__")
        _check_key(key)
        encoded = self.encode(dict(sample))
        if not isinstance(encoded, Mapping):
            raise SampleError(f"the encoder returned {type(encoded).__name__}, not a dict", key=key)
        chunks: list[Any] = []
        names: list[str] = []
        offsets: list[int] = []
        sizes: list[int] = []
        total = 0
        seen: dict[str, str] = {}
        for field in sorted(encoded):
            if field == "__key__" or (field.startswith("_") and not self.keep_meta):
                continue
            _check_field(field, key)
            lower = field.lower()
            if lower in seen:
                raise SampleError(
                    f"fields {seen[lower]!r} and {field!r} differ only in case; readers "
                    "lowercase extensions, so they would collide",
                    key=key,
                )
            seen[lower] = field
            value = encoded[field]
            if isinstance(value, str):
                value = value.encode("utf-8")
            elif isinstance(value, memoryview) and not value.c_contiguous:
                value = value.tobytes()
            elif not isinstance(value, BYTES_TYPES):
                raise SampleError(
                    f"field {field!r} is {type(value).__name__} after encoding, not bytes or str",
                    key=key,
                )
            size = value.nbytes if isinstance(value, memoryview) else len(value)
            name = f"{key}.{field}"
            header = self.header(name, size)
            chunks.append(header)
            chunks.append(value)
            pad = _padding(size)
            if pad:
                chunks.append(pad)
            names.append(name)
            offsets.append(total + len(header))
            sizes.append(size)
            total += len(header) + size + len(pad)
        return FormattedSample(chunks, total, names, tuple(offsets), tuple(sizes))


def _check_key(key: Any) -> None:
    if key is None:
        raise SampleError("the sample has no __key__")
    if not isinstance(key, str):
        raise SampleError(f"__key__ must be str, not {type(key).__name__}", key=key)
    base = key.rpartition("/")[2]
    if not base or "." in base or "\0" in key:
        raise SampleError(
            "__key__ must have a non-empty last path component without '.' or NUL "
            "(readers split member names at the first dot of that component)",
            key=key,
        )


def _check_field(field: Any, key: Any) -> None:
    if not isinstance(field, str) or not field or "/" in field or "\0" in field:
        raise SampleError(
            f"field name {field!r} must be a non-empty str without '/' or NUL", key=key
        )
