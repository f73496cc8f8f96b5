"""DALI's per-shard index format v1.2 (``.idx``): grouping, writing and parsing.

A text file beside its shard (``shard-000001.idx`` for ``shard-000001.tar``)::

    v1.2 <number of samples>
    <ext> <data offset> <size> <member name> <ext> <data offset> <size> <member name> ...
    ...

one line per sample, the fields of all its members separated by single spaces (NVIDIA DALI's
``tools/wds2idx.py`` writes it; ``fn.readers.webdataset`` reads it). The offset is where the
member's data starts in the uncompressed tar (``tarfile``'s ``offset_data``), the extension is
the member name after the first dot of its last path component, in its original case.

Samples are grouped exactly as the sample reader groups members (:func:`split_member`), so an
index has the reader's samples, in the reader's order, and its count is the reader's count.

Where wds_cloud writes something else than ``wds2idx.py`` (see ``docs/indexes.md``): shards with
PAX extended headers (webdataset's ``TarWriter`` writes one before every member) get their true
data offsets, where ``wds2idx.py`` adds the next member's extended-header size; names are written
as their raw bytes (GNU tar's listing escapes non-ASCII bytes, ``wds2idx.py`` writes the escapes);
members the reader skips (``__meta__``, names without a key) are left out. A member whose name
or extension holds whitespace (or an empty extension) cannot be written: the fields are
whitespace-separated, so :func:`format_index` raises :class:`SampleError` naming it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import NamedTuple

from wds_cloud.core.samples import split_member
from wds_cloud.errors import SampleError, ShardReadError

VERSION = "v1.2"
_VERSION_B = VERSION.encode("ascii")
_WHITESPACE = frozenset(" \t\n\r\x0b\x0c")


class IdxMember(NamedTuple):
    """One member of a sample in an index.

    Attributes:
        ext: the extension, in the case of the member name.
        offset: byte offset of the member's data in the uncompressed tar.
        size: the data size in bytes.
        name: the member name.
    """

    ext: str
    offset: int
    size: int
    name: str


IdxSample = list[IdxMember]


def group_entries(entries: Iterable[tuple[str, int, int]]) -> list[IdxSample]:
    """Group ``(name, data offset, size)`` of regular members into samples, as the reader does.

    Consecutive members with the same key form a sample; members the reader skips are left
    out. A repeated extension inside a sample is kept (the reader reports it when the sample
    is read, as it does when streaming).
    """
    samples: list[IdxSample] = []
    current_key: str | None = None
    for name, offset, size in entries:
        split = split_member(name)
        if split is None:
            continue
        key, ext = split
        member = IdxMember(ext, offset, size, name)
        if key == current_key and samples:
            samples[-1].append(member)
        else:
            samples.append([member])
            current_key = key
    return samples


def unrepresentable(member: IdxMember) -> str | None:
    """Why ``member`` cannot be written in the v1.2 format, or None when it can."""
    if not member.ext:
        return f"member {member.name!r} has an empty extension"
    if any(c in _WHITESPACE for c in member.name):
        return f"member name {member.name!r} holds whitespace"
    return None


def _text(value: str) -> bytes:
    return value.encode("utf-8", "surrogateescape")


def format_index(samples: Sequence[IdxSample], *, url: str | None = None) -> bytes:
    """The ``.idx`` bytes for ``samples`` (byte-identical to ``wds2idx.py`` where it is right).

    Args:
        samples: from :func:`group_entries`.
        url: the shard, named in errors.

    Raises:
        SampleError: a member name or extension cannot be represented (whitespace, empty
            extension): the format separates fields with whitespace.
    """
    lines = [b"%s %d\n" % (_VERSION_B, len(samples))]
    for sample in samples:
        parts = []
        for member in sample:
            problem = unrepresentable(member)
            if problem is not None:
                raise SampleError(
                    f"{problem}, which the DALI index format (whitespace-separated fields) "
                    "cannot represent; this shard can be streamed but not indexed",
                    url=url,
                )
            parts.append(
                b"%s %d %d %s" % (_text(member.ext), member.offset, member.size, _text(member.name))
            )
        lines.append(b" ".join(parts) + b"\n")
    return b"".join(lines)


class ShardIndex:
    """A parsed ``.idx`` file; samples are parsed from their line when asked for.

    Args:
        data: the file's bytes.
        url: where it came from, named in errors.

    Raises:
        ShardReadError: not a v1.2 index, or the sample count disagrees with the lines.
    """

    def __init__(self, data: bytes, *, url: str | None = None) -> None:
        self.url = url
        lines = data.split(b"\n")
        if lines and lines[-1] == b"":
            lines.pop()
        head = lines[0].split() if lines else []
        if len(head) < 2 or not head[1].isdigit():
            raise ShardReadError(
                f"not a DALI index: the first line is {lines[0][:60]!r}, not 'v1.2 <count>'"
                if lines
                else "empty index file",
                url=url,
                offset=0,
            )
        if head[0] != _VERSION_B:
            raise ShardReadError(
                f"index version {head[0].decode('ascii', 'replace')!r} is not supported (only "
                f"{VERSION}, which names every member); rebuild it with 'wds-cloud index'",
                url=url,
                offset=0,
            )
        self._lines = lines[1:]
        count = int(head[1])
        if count != len(self._lines):
            raise ShardReadError(
                f"the index announces {count} samples but has {len(self._lines)} sample lines",
                url=url,
                offset=0,
            )

    @classmethod
    def from_samples(cls, samples: Sequence[IdxSample], *, url: str | None = None) -> ShardIndex:
        """The index of ``samples`` (see :func:`format_index`)."""
        return cls(format_index(samples, url=url), url=url)

    def __len__(self) -> int:
        return len(self._lines)

    def to_bytes(self) -> bytes:
        """The file's bytes."""
        return b"%s %d\n" % (_VERSION_B, len(self._lines)) + b"".join(
            line + b"\n" for line in self._lines
        )

    def sample(self, index: int) -> tuple[str, IdxSample]:
        """``(key, members)`` of sample ``index`` (0-based).

        Raises:
            IndexError: no such sample.
            ShardReadError: the line is malformed, or its members are not one sample.
        """
        line = self._lines[index]
        fields = line.split(b" ")
        if len(fields) % 4 or not fields[0]:
            raise self._bad(index, "expected groups of '<ext> <offset> <size> <name>'")
        members: IdxSample = []
        key: str | None = None
        for i in range(0, len(fields), 4):
            ext, offset, size, raw = fields[i : i + 4]
            if not (offset.isdigit() and size.isdigit()):
                raise self._bad(index, f"offset {offset!r} or size {size!r} is not a number")
            name = raw.decode("utf-8", "surrogateescape")
            split = split_member(name)
            if split is None or split[1] != ext.decode("utf-8", "surrogateescape"):
                raise self._bad(index, f"{name!r} is not a sample member with extension {ext!r}")
            if key is None:
                key = split[0]
            elif split[0] != key:
                raise self._bad(index, f"{name!r} does not belong to sample {key!r}")
            members.append(IdxMember(split[1], int(offset), int(size), name))
        assert key is not None
        return key, members

    def samples(self) -> Iterator[tuple[str, IdxSample]]:
        """Every ``(key, members)`` in order."""
        for i in range(len(self._lines)):
            yield self.sample(i)

    def _bad(self, index: int, what: str) -> ShardReadError:
        return ShardReadError(f"malformed index line {index + 2}: {what}", url=self.url)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ShardIndex) and self._lines == other._lines

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"ShardIndex({len(self)} samples, url={self.url!r})"


_TAR_SUFFIXES = (".tar.gz", ".tar.bz2", ".tar.xz", ".tgz", ".tar")


def idx_url(shard_url: str) -> str:
    """The URL of a shard's index: its name with the tar suffix replaced by ``.idx``.

    ``s3://b/train/shard-000001.tar`` -> ``s3://b/train/shard-000001.idx``; ``x.tar.gz`` ->
    ``x.idx``; a name without a tar suffix gets ``.idx`` appended. A query string
    (``ais://b/x.tar?provider=aws``) stays at the end.
    """
    base, sep, query = shard_url.partition("?") if "://" in shard_url else (shard_url, "", "")
    lowered = base.lower()
    for suffix in _TAR_SUFFIXES:
        if lowered.endswith(suffix) and len(base) > len(suffix) and base[-len(suffix) - 1] != "/":
            base = base[: -len(suffix)]
            break
    return f"{base}.idx{sep}{query}"


__all__ = [
    "VERSION",
    "IdxMember",
    "IdxSample",
    "ShardIndex",
    "format_index",
    "group_entries",
    "idx_url",
    "unrepresentable",
]
