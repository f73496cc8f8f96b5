"""The shard index a writer writes beside its shard (``TarWriter(index=...)``).

The writer records ``(name, data offset, size)`` of every member as it writes it; at close the
entries are grouped by the sample reader's rule and formatted as DALI's ``.idx``
(:mod:`wds_cloud.index.format`), written to an uncommitted sink that the writer commits right
after the shard. Names that the format cannot hold are refused before a sample is written.
"""

from __future__ import annotations

from typing import Any

from wds_cloud.errors import ConfigError, SampleError
from wds_cloud.openers.registry import OpenerRegistry, abort_quietly, open_sink


def check_indexable(formatted: Any, *, key: Any = None) -> None:
    """Raise when a member name of ``formatted`` cannot be written in a DALI ``.idx``.

    Raises:
        SampleError: a name holds whitespace (the format separates fields with it).
    """
    for name in formatted.names:
        if any(c in name for c in " \t\n\r\x0b\x0c"):
            raise SampleError(
                f"member name {name!r} holds whitespace, which the DALI index format cannot "
                "represent; write without index=True or use another key",
                key=key,
            )


def index_target(index: bool | str, name: str | None) -> str:
    from wds_cloud.index.format import idx_url
    from wds_cloud.openers.registry import url_scheme

    if isinstance(index, str):
        return index
    if name is None or name == "-" or url_scheme(name) == "pipe":
        raise ConfigError(
            "index=True writes the index beside a named target (a path or URL); for a stream, "
            "'-' or pipe: give its destination: index='path/or/url.idx'"
        )
    return idx_url(name)


def open_index(
    entries: list[tuple[str, int, int]], target: str, registry: OpenerRegistry | None
) -> tuple[Any, Any]:
    """``(ShardIndex, sink)``: the index of ``entries``, written to an uncommitted sink at
    ``target`` (the caller commits it with ``close()`` or discards it with ``abort()``).

    Raises:
        UploadError: the sink cannot be opened or written (nothing is left behind).
    """
    from wds_cloud.index.format import ShardIndex, group_entries

    index = ShardIndex.from_samples(group_entries(entries), url=target)
    sink = open_sink(target, registry)
    try:
        sink.write(index.to_bytes())
    except BaseException:
        abort_quietly(sink)
        raise
    return index, sink


__all__ = ["check_indexable", "index_target", "open_index"]
