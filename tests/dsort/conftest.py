"""Fixtures for the dSort tests: the AIStore emulator, an SDK client, and shard builders."""

from __future__ import annotations

import io
import tarfile
from dataclasses import dataclass

from tests.emulators.ais.store import AisStore


@dataclass(frozen=True)
class Record:
    """One sample as written into an input shard."""

    key: str
    members: dict[str, bytes]

    @property
    def size(self) -> int:
        """dSort's record size: the sum of member content sizes."""
        return sum(len(d) for d in self.members.values())


def make_shards(
    store: AisStore,
    bucket: str,
    *,
    shards: int = 4,
    per_shard: int = 6,
    template: str = "samples-{:02d}.tar",
    prefix: str = "",
) -> list[Record]:
    """Writes ``shards`` tar shards of ``per_shard`` samples each; returns the records.

    Sample ``i`` (global index) has key ``{prefix}sample-{i:04d}`` (``a/b.c`` style keys when
    ``prefix`` has a slash), a ``.cls`` member holding ``(i * 7) % 10``, a ``.score`` float and a
    ``.bin`` payload whose size varies with ``i`` (so shard sizes differ).
    """
    store.create_bucket(bucket, exist_ok=True)
    records = []
    for s in range(shards):
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            for j in range(per_shard):
                i = s * per_shard + j
                rec = Record(
                    f"{prefix}sample-{i:04d}",
                    {
                        ".cls": str((i * 7) % 10).encode(),
                        ".score": f"{(i * 37) % 23 / 4:.2f}".encode(),
                        ".seg.bin": bytes([i % 256]) * (50 + (i * 13) % 97),
                    },
                )
                for ext, data in rec.members.items():
                    info = tarfile.TarInfo(rec.key + ext)
                    info.size = len(data)
                    tar.addfile(info, io.BytesIO(data))
                records.append(rec)
        store.put_object(bucket, template.format(s), buf.getvalue())
    return records


def read_shards(store: AisStore, bucket: str, prefix: str = "") -> list[tuple[str, list[Record]]]:
    """``(shard name, records in order)`` of every shard in ``bucket``, in object-name order.

    Members of one key are grouped the way dSort writes them (together, in original order).
    """
    out = []
    for obj in store.list_objects(bucket, prefix=prefix):
        recs: list[Record] = []
        with tarfile.open(fileobj=io.BytesIO(obj.data), mode="r:*") as tar:
            for info in tar:
                base = info.name.rsplit("/", 1)[-1]
                key = info.name[: len(info.name) - len(base)] + base.split(".", 1)[0]
                ext = info.name[len(key) :]
                member = tar.extractfile(info)
                data = member.read() if member else b""
                if not recs or recs[-1].key != key:
                    recs.append(Record(key, {}))
                recs[-1].members[ext] = data
        out.append((obj.name, recs))
    return out
