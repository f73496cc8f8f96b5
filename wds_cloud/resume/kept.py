"""What resume keeps on the objects it tracks, in one place.

Resume's bookkeeping lives on the pipeline (or ``RandomMix``) it belongs to, so that it is
pickled with it into DataLoader workers. The attributes, all written here and nowhere else:

- ``_resume_ledger``: the ledger of the pass in progress of the object iterated;
- ``_resume_watch``: the :class:`~wds_cloud.resume.track.Watch` of its ``iter()``;
- ``_resume_pending``: a state loaded and not iterated yet (``RandomMix`` reads and pops its
  own by this name);
- ``_resume_emit``, ``_resume_ctx``: set on a DataLoader's dataset before the workers start:
  that ``DataPipeline.__iter__``/``RandomMix.__iter__`` emit tagged values (``True``, or the
  function emitting a mix pass), and the context of the pass.
"""

from __future__ import annotations

from typing import Any

LEDGER = "_resume_ledger"
WATCH = "_resume_watch"
PENDING = "_resume_pending"
EMIT = "_resume_emit"
CTX = "_resume_ctx"


def get(obj: Any, name: str) -> Any:
    """``obj``'s attribute ``name`` (one of this module's), or None."""
    return vars(obj).get(name)


def put(obj: Any, name: str, value: Any) -> None:
    """Set ``obj``'s attribute ``name`` (one of this module's)."""
    setattr(obj, name, value)


def pop(obj: Any, name: str) -> Any:
    """Remove ``obj``'s attribute ``name`` (one of this module's); its value, or None."""
    return vars(obj).pop(name, None)
