"""Committing uploads to ``az://`` as a block blob: staged blocks, one block list.

The writer holds at most one ``block_size`` block in memory and stages each full block with
``Put Block`` (``BlobClient.stage_block``) as it is written; staged blocks are invisible. Only
:meth:`AzureWriter.close` commits them with ``Put Block List``
(``BlobClient.commit_block_list``): the blob appears under its name, complete, in one step.
:meth:`AzureWriter.abort` (or any failure, an exception in a ``with`` block, garbage
collection) commits nothing: the uncommitted blocks never become a blob, an existing blob under
the name stays as it was, and Azure deletes uncommitted blocks after a week.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from wds_cloud.errors import UploadError
from wds_cloud.openers.azure.config import MAX_BLOCKS
from wds_cloud.openers.streams.writer import CommittingWriter

if TYPE_CHECKING:
    from wds_cloud.openers.streams.resumable import TranslateError


class AzureWriter(CommittingWriter):
    """Writable binary stream staging blocks of a block blob; ``close()`` commits them.

    Args:
        blob: the ``azure.storage.blob.BlobClient`` of the destination.
        url: the destination URL, for error messages.
        translate: the opener's error translation (endpoint bound).
        block_size: bytes per staged block.
        content_type: the stored content type.

    Attributes:
        blocks: the ids of the blocks staged so far.
    """

    def __init__(
        self,
        blob: Any,
        *,
        url: str,
        translate: TranslateError,
        block_size: int,
        content_type: str = "application/x-tar",
    ) -> None:
        self._blob = blob
        self._translate = translate
        self._block_size = block_size
        self._content_type = content_type
        self._buffer = bytearray()
        # one writer's ids: unique (a random prefix) and all of the same length, as Azure wants
        self._prefix = uuid.uuid4().hex
        self.blocks: list[str] = []
        super().__init__(url)

    def _error(self, exc: Exception, action: str) -> UploadError:
        doing = "upload failed" if action == "writing" else "committing the upload failed"
        reason = self._translate(exc, url=self.url).reason
        return UploadError(f"{doing} after {self.bytes_written} bytes: {reason}", url=self.url)

    def _stage(self, data: bytes | bytearray | memoryview) -> None:
        if len(self.blocks) >= MAX_BLOCKS:
            raise UploadError(
                f"a block blob holds at most {MAX_BLOCKS} blocks; raise block_size "
                f"(now {self._block_size} bytes)",
                url=self.url,
            )
        block_id = f"{self._prefix}-{len(self.blocks):06d}"
        self._blob.stage_block(block_id, bytes(data), length=len(data))
        self.blocks.append(block_id)

    def _write(self, view: memoryview) -> None:
        size = self._block_size
        if not self._buffer and len(view) >= size:  # whole blocks straight from the caller
            whole = len(view) - len(view) % size
            for start in range(0, whole, size):
                self._stage(view[start : start + size])
            view = view[whole:]
        self._buffer += view
        while len(self._buffer) >= size:
            self._stage(self._buffer[:size])
            del self._buffer[:size]

    def _commit(self) -> None:
        """Stage what is left, then commit the block list: the blob appears."""
        from azure.storage.blob import BlobBlock, ContentSettings

        if self._buffer:
            self._stage(self._buffer)
            self._buffer = bytearray()
        self._blob.commit_block_list(
            [BlobBlock(block_id=b) for b in self.blocks],
            content_settings=ContentSettings(content_type=self._content_type),
        )

    def _discard(self) -> None:
        """Commit nothing: staged blocks stay invisible and expire (Azure has no call that
        drops them without committing)."""
        self._buffer = bytearray()
