"""Exact, deterministic, elastic mid-epoch resume over plain tar shards (see ``docs/resume.md``).

Every sample read by a resumable pipeline carries its source position: the shard URL and the
byte extent ``[start, end)`` of its tar headers and data. The object the training loop iterates
(a ``WebDataset``, a ``DataPipeline``, a ``WebLoader``, ``make_loader``'s loader) records the
positions of what it *delivered*; its state is "the epoch's shard order minus what was
delivered", so samples held in shuffle buffers, prefetch queues or a half-filled batch are
simply not delivered yet and are read again, by their byte ranges, on resume.
"""

from __future__ import annotations

from wds_cloud.resume.merge import merge_states
from wds_cloud.resume.state import STATE_FORMAT

__all__ = ["STATE_FORMAT", "merge_states"]
