"""Tar header fields: names, octal/base-256 numbers, checksums and PAX records.

The per-header helpers of the streaming reader (:mod:`wds_cloud.core.tar`) and of random access
(:mod:`wds_cloud.index.indexed` checks the header before each member it reads).
"""

from __future__ import annotations

import zlib

from wds_cloud.errors import ShardReadError

BLOCK = 512
ZERO_BLOCK = bytes(BLOCK)
REGULAR = frozenset(b"0\x007")  # typeflags of regular files (0, NUL, contiguous)


def decode_name(raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw.decode("utf-8", "surrogateescape")


def octal(field: bytes) -> int:
    if field[0] & 0x80:  # GNU base-256 for values that do not fit in octal
        value = int.from_bytes(field[1:], "big")
        return value - (1 << (8 * (len(field) - 1))) if field[0] & 0x40 else value
    digits = field.split(b"\x00", 1)[0].strip()
    return int(digits, 8) if digits else 0


CHECKSUM_FIELDS: dict[bytes, tuple[int, int]] = {}


def checksum_field(field: bytes) -> tuple[int, int]:
    """(stored checksum, byte sum of the field) for a header's 8-byte checksum field."""
    entry = CHECKSUM_FIELDS.get(field)
    if entry is None:
        entry = (octal(field), sum(field))
        if len(CHECKSUM_FIELDS) < 65536:
            CHECKSUM_FIELDS[field] = entry
    return entry


def checksum_ok(header: bytes) -> bool:
    """True when the stored checksum matches (unsigned, or the signed variant old tars use)."""
    try:
        stored, field_sum = checksum_field(header[148:156])
    except ValueError:
        return False
    # Exact unsigned byte sum from Adler-32's low half: each 256-byte half sums to < 65521.
    # The checksum is computed with its own field read as eight spaces (8 * 32 = 256).
    total = (
        (zlib.adler32(header[:256]) & 0xFFFF)
        + (zlib.adler32(header[256:]) & 0xFFFF)
        - 2
        - field_sum
        + 256
    )
    if total == stored:
        return True
    signed = total - 256 * sum(1 for b in header[:148] + header[156:] if b > 127)
    return signed == stored


def parse_pax(data: bytes, url: str | None, offset: int) -> dict[str, str]:
    """Parse PAX records ``"<len> key=value\\n"``; only the keys the reader uses are kept."""
    records: dict[str, str] = {}
    pos, end = 0, len(data)
    while pos < end:
        if data[pos] == 0:  # padding
            break
        space = data.find(b" ", pos)
        if space < 0:
            raise ShardReadError("malformed PAX header record", url=url, offset=offset)
        try:
            length = int(data[pos:space])
        except ValueError:
            raise ShardReadError("malformed PAX record length", url=url, offset=offset) from None
        record = data[space + 1 : pos + length]
        if length <= 0 or pos + length > end or not record.endswith(b"\n"):
            raise ShardReadError("malformed PAX header record", url=url, offset=offset)
        key, eq, value = record[:-1].partition(b"=")
        if not eq:
            raise ShardReadError("PAX record without '='", url=url, offset=offset)
        if key in (b"path", b"size"):
            records[key.decode("ascii")] = decode_name(value)
        pos += length
    return records


def is_member_header(block: bytes) -> bool:
    """True when ``block`` is a valid tar header (checksum) of a regular file.

    Random access checks the header before each member it reads from an index, so an index
    that no longer matches its shard is caught instead of returning other bytes.
    """
    return (
        len(block) == BLOCK
        and block != ZERO_BLOCK
        and block[156] in REGULAR
        and checksum_ok(bytes(block))
    )
