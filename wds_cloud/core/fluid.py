"""``FluidInterface``: the chainable methods of webdataset 1.0.2 (``ds.shuffle(1000).map(f)``).

Each method returns a shallow copy with one stage appended (``self.compose(stage)``), so the
original is unchanged; ``with_epoch``, ``with_length`` and ``repeat`` (on ``DataPipeline``)
modify ``self`` and return it, as in webdataset.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Self

from wds_cloud.core import batching, stages
from wds_cloud.core.handlers import Handler, reraise_exception
from wds_cloud.core.shuffle import shuffle as _shuffle_stage


class FluidInterface:
    """Mixin for classes with ``compose(*stages)`` (``DataPipeline`` and its subclasses)."""

    def compose(self, *stages: Any) -> Self:  # pragma: no cover - provided by DataPipeline
        raise NotImplementedError

    def shuffle(self, size: int, **kw: Any) -> Self:
        """Buffer-shuffle samples (``bufsize=size``; ``initial=``, ``seed=``, ``rng=``).

        ``size < 1`` returns ``self`` unchanged.
        """
        if size < 1:
            return self
        return self.compose(_shuffle_stage(size, **kw))

    def decode(self, *args: Any, handler: Handler = reraise_exception, **kw: Any) -> Self:
        """Decode fields by extension (``wds_cloud.core.decode.decode``); strings such as
        ``"rgb"`` are image specs; ``pre=``, ``post=``, ``only=``, ``partial=`` as webdataset."""
        from wds_cloud.core.decode import decode

        return self.compose(decode(*args, handler=handler, **kw))

    def map(self, f: Callable[[Any], Any], handler: Handler = reraise_exception) -> Self:
        """Apply ``f`` to each sample; ``None`` results drop the sample."""
        return self.compose(stages.map(f, handler=handler))

    def map_dict(self, handler: Handler = reraise_exception, **kw: Callable[[Any], Any]) -> Self:
        """Apply a function per field: ``map_dict(png=f, cls=int)``."""
        return self.compose(stages.map_dict(handler=handler, **kw))

    def map_tuple(
        self, *args: Callable[[Any], Any] | None, handler: Handler = reraise_exception
    ) -> Self:
        """Apply a function per tuple position (``None`` keeps the field)."""
        return self.compose(stages.map_tuple(*args, handler=handler))

    def to_tuple(
        self,
        *args: str,
        handler: Handler = reraise_exception,
        missing_is_error: bool = True,
        none_is_error: bool | None = None,
    ) -> Self:
        """Turn dict samples into tuples: ``to_tuple("png;jpg", "cls")`` or ``"png cls"``."""
        return self.compose(
            stages.to_tuple(
                *args,
                handler=handler,
                missing_is_error=missing_is_error,
                none_is_error=none_is_error,
            )
        )

    def select(self, predicate: Callable[[Any], Any], **kw: Any) -> Self:
        """Keep samples for which ``predicate`` is truthy."""
        return self.compose(stages.select(predicate, **kw))

    def rename(self, **kw: Any) -> Self:
        """Rename fields: ``rename(image="png;jpg", keep=False)``."""
        return self.compose(stages.rename(**kw))

    def rename_keys(self, *args: tuple[str, str], **kw: Any) -> Self:
        """Rename fields by fnmatch patterns on their base names."""
        return self.compose(stages.rename_keys(*args, **kw))

    def extract_keys(self, *args: str, **kw: Any) -> Self:
        """Tuple of the fields matching each pattern (``"*.png;*.jpg"``)."""
        return self.compose(stages.extract_keys(*args, **kw))

    def slice(self, *args: int | None) -> Self:
        """``itertools.islice`` over the samples."""
        return self.compose(stages.slice(*args))

    def rsample(self, p: float = 0.5, seed: Any = None) -> Self:
        """Keep each sample with probability ``p``."""
        return self.compose(stages.rsample(p, seed=seed))

    def batched(
        self,
        batchsize: int,
        collation_fn: Callable[[list[Any]], Any] | None = batching.default_collation_fn,
        partial: bool = True,
    ) -> Self:
        """Collate ``batchsize`` samples per batch."""
        return self.compose(batching.batched(batchsize, collation_fn=collation_fn, partial=partial))

    def unbatched(self) -> Self:
        """Split batches back into samples."""
        return self.compose(batching.unbatched())

    def listed(self, batchsize: int, partial: bool = True) -> Self:
        """Group samples into lists of ``batchsize``."""
        return self.compose(batching.listed(batchsize, partial=partial))

    def unlisted(self) -> Self:
        """Flatten lists of samples."""
        return self.compose(batching.unlisted())

    def pack(self, capacity: int, **kw: Any) -> Self:
        """Pack samples into groups of total ``length`` at most ``capacity`` (``length=``,
        ``buffer=``, ``pack_fn=``, ``handler=``; see ``wds_cloud.core.packing.Pack``)."""
        from wds_cloud.core.packing import Pack

        return self.compose(Pack(capacity, **kw))

    def group_by(self, key: Callable[[Any], Any], batch_size: int, **kw: Any) -> Self:
        """Batches of samples sharing ``key(sample)`` (``buffer=``, ``collation_fn=``,
        ``partial=``, ``handler=``; see ``wds_cloud.core.packing.GroupBy``)."""
        from wds_cloud.core.packing import GroupBy

        return self.compose(GroupBy(key, batch_size, **kw))

    def log_keys(self, logfile: str | None = None) -> Self:
        """Log sample keys to ``logfile``."""
        return self.compose(stages.log_keys(logfile))

    def info(self, **kw: Any) -> Self:
        """Print the first few samples to stderr."""
        return self.compose(stages.info(**kw))

    def associate(self, associator: Any) -> Self:
        """Merge per-key extra fields into samples."""
        return self.compose(stages.associate(associator))

    def mcached(self) -> Self:
        """Keep the first full pass in memory and replay it on later passes."""
        return self.compose(Cached())

    def lmdb_cached(self, *args: Any, **kw: Any) -> Self:
        """Record the first full pass in an LMDB file and replay it (see ``LMDBCached``)."""
        from wds_cloud.core.lmdbcache import LMDBCached

        return self.compose(LMDBCached(*args, **kw))


class Cached:
    """Stage that records the first complete pass and replays it afterwards (``mcached``).

    A pass that is abandoned early is not recorded.
    """

    def __init__(self) -> None:
        self.cache: list[Any] | None = None

    def run(self, src: Any) -> Any:
        """Replay the cache, or record this pass."""
        if self.cache is not None:
            return iter(self.cache)
        return self._record(src)

    def _record(self, src: Any) -> Any:
        items: list[Any] = []
        for sample in src:
            items.append(sample)
            yield sample
        self.cache = items
