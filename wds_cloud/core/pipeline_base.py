"""What code that walks pipelines needs of them without importing :mod:`wds_cloud.core.pipeline`.

``DataPipeline`` calls the resume machinery (:mod:`wds_cloud.resume`) from ``__iter__``,
``state_dict`` and ``load_state_dict``, and that machinery walks pipelines (nested in
pipelines, as a DataLoader's dataset, mixed by a ``RandomMix``) and runs their stages. It takes
both from here: :func:`invoke_stage`, how a pipeline runs one stage, and :class:`PipelineBase`,
the base class by which it recognises a ``DataPipeline``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from wds_cloud.errors import ConfigError
from wds_cloud.observe.passes import watch_stage
from wds_cloud.observe.profile import current as current_recorder


def invoke_stage(f: Any, *src: Any) -> Iterator[Any]:
    """Run one pipeline stage on ``src`` (nothing for the first stage).

    Raises:
        ConfigError: ``f`` is not a valid stage.
    """
    result: Iterator[Any]
    if hasattr(f, "run") and not isinstance(f, type):
        result = f.run(*src)
    elif isinstance(f, list):
        return iter(f)
    elif not src and hasattr(f, "__iter__"):
        result = iter(f)
    elif callable(f):
        result = f(*src)
    else:
        raise ConfigError(
            f"{f!r} is not a valid pipeline stage (need a callable, iterable or .run)"
        )
    rec = current_recorder()  # None unless profiling is on in this process
    if rec is not None:
        watch_stage(rec, result, f)
    return result


class PipelineBase:
    """The base class of :class:`~wds_cloud.core.pipeline.DataPipeline`, and of nothing else:
    ``isinstance(x, PipelineBase)`` tells a ``DataPipeline`` in the modules it imports. It
    holds no behaviour; it names what they read and call (``DataPipeline`` documents each)."""

    pipeline: list[Any]
    repetitions: int
    nsamples: int
    per_rank: bool

    def epoch_size(self) -> int:
        """Items an iterator yields per epoch (see ``DataPipeline.epoch_size``)."""
        raise NotImplementedError
