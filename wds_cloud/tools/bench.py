"""Throughput measurement for training input pipelines.

The method (from the post "Training in PyTorch from Amazon S3"): iterate the loader with a
training step (empty by default), record the time of every ``window`` batches, drop the first
window (worker start-up, connection set-up, first shard opens), and report the mean and
variance of the window time, samples/s and MB/s. A run with no full window after the first
one, or whose measured windows hold no more batches than the loader can have ready in advance
(``prefetched``: a DataLoader's workers * prefetch factor), is too short: the window figures
and rates are None, :attr:`BenchResult.too_short` says why, and only the wall-clock rates
(start-up included) are given. The comparison mode times the same training
step on one cached batch repeated the same number of times: if the loader's window time is
close to the step-only window time, data loading keeps up; if it is much larger, loading is
the bottleneck. Both are reported, with their ratio.

Bytes are the sample payloads before decode (the sum of the tar members' data sizes, tar
headers and padding excluded), counted in the workers by :func:`bench_urls`. For an arbitrary
loader pass ``nbytes=`` (a function of a batch) or MB/s is not reported.
"""

from __future__ import annotations

import itertools
import json
import statistics
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from wds_cloud.core.collate import batch_samples
from wds_cloud.errors import ConfigError
from wds_cloud.redact import redact_url

if TYPE_CHECKING:
    from wds_cloud.observe.report import ProfileReport

__all__ = ["BenchResult", "bench_loader", "bench_urls", "payload_nbytes"]

Step = Callable[[Any], Any]


@dataclass
class BenchResult:
    """What a benchmark measured (times in seconds, rates over the windows after the first).

    Attributes:
        batches: batches iterated (all windows, the first included).
        samples: samples in those batches.
        nbytes: payload bytes in those batches (None when not counted).
        seconds: wall time of the whole run.
        window: batches per window.
        window_times: time of every complete window, first included.
        window_mean: mean window time, first window dropped (None when too short).
        window_variance: sample variance of the window time, first window dropped (0 with one
            measured window; None when too short).
        samples_per_s: samples/s over the windows after the first (None when too short).
        mb_per_s: payload MB/s (10**6 bytes) over the same span (None when too short or when
            bytes are not counted).
        wall_samples_per_s: samples / ``seconds``: the whole run, start-up included.
        wall_mb_per_s: payload MB / ``seconds`` (None when bytes are not counted).
        too_short: why the run gave no window figures, or None when it did.
        step_window_mean: comparison mode: mean window time of the step on one cached batch
            (None without comparison or when the run is too short).
        step_window_variance: its variance.
        loader_to_step_ratio: ``window_mean / step_window_mean`` (None without comparison,
            when the run is too short, or when the step time is 0).
        config: what was measured (URLs with credentials redacted, workers, batch size...).
        timeline: ``(seconds since the start, samples so far)`` at the end of every window
            (what ``--plot`` draws as samples/s over time).
        profile: the loader's :class:`~wds_cloud.observe.report.ProfileReport` when it was
            profiled (``bench_urls(profile=True)``), else None.
    """

    batches: int
    samples: int
    nbytes: int | None
    seconds: float
    window: int
    window_times: list[float]
    window_mean: float | None
    window_variance: float | None
    samples_per_s: float | None
    mb_per_s: float | None
    wall_samples_per_s: float = 0.0
    wall_mb_per_s: float | None = None
    too_short: str | None = None
    step_window_mean: float | None = None
    step_window_variance: float | None = None
    loader_to_step_ratio: float | None = None
    config: dict[str, Any] = field(default_factory=dict)
    timeline: list[tuple[float, int]] = field(default_factory=list)
    profile: ProfileReport | None = field(default=None, repr=False)

    def to_dict(self) -> dict[str, Any]:
        """The result as plain JSON-compatible values (the profile as its ``to_dict()``)."""
        report, self.profile = self.profile, None
        try:
            out = asdict(self)
        finally:
            self.profile = report
        out["profile"] = None if report is None else report.to_dict()
        return out

    def to_json(self) -> str:
        """The result as a JSON document."""
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)

    def table(self) -> str:
        """A small human-readable table; a too-short run ends with a note saying why."""
        measured = max(0, len(self.window_times) - 1)
        wall_mb = "" if self.wall_mb_per_s is None else f", {self.wall_mb_per_s:,.1f} MB/s"
        rows: list[tuple[str, str]] = [
            ("batches", f"{self.batches} ({len(self.window_times)} full windows of {self.window})"),
            ("samples", f"{self.samples}"),
            ("payload MB", "-" if self.nbytes is None else f"{self.nbytes / 1e6:.1f}"),
            ("wall time", f"{self.seconds:.2f} s"),
        ]
        if self.too_short is None:
            rows += [
                (
                    "window time mean",
                    f"{self.window_mean or 0:.4f} s (over {measured} windows, first dropped)",
                ),
                ("window time variance", f"{self.window_variance or 0:.3g} s^2"),
                ("samples/s", f"{self.samples_per_s or 0:,.0f}"),
                ("MB/s", "-" if self.mb_per_s is None else f"{self.mb_per_s:,.1f}"),
            ]
        rows.append(
            ("wall clock", f"{self.wall_samples_per_s:,.0f} samples/s{wall_mb} (start-up included)")
        )
        if self.step_window_mean is not None:
            rows += [
                ("step-only window mean", f"{self.step_window_mean:.4f} s"),
                ("step-only window variance", f"{self.step_window_variance or 0:.3g} s^2"),
            ]
            ratio = self.loader_to_step_ratio
            verdict = ""
            if ratio is not None:
                verdict = (
                    "  (data loading is the bottleneck)"
                    if ratio > 1.1
                    else "  (data loading keeps up)"
                )
            rows.append(("loader/step", ("-" if ratio is None else f"{ratio:.2f}") + verdict))
        width = max(len(k) for k, _ in rows)
        text = "\n".join(f"{k.ljust(width)}  {v}" for k, v in rows)
        if self.too_short is not None:
            text += f"\nno window mean, variance or rate: {self.too_short}"
        if self.profile is not None:
            text += "\n\n" + self.profile.table()
        return text


def _noop(batch: Any) -> None:
    return None


def _too_short(batches: int, window: int, windows: int, prefetched: int) -> str | None:
    """Why ``windows`` full windows of ``window`` batches give no figure, or None."""
    if windows < 2:
        return (
            f"the run was shorter than one full window after the first: {batches} batches, "
            f"and the method drops the first window of {window} (start-up) and times the "
            f"following ones; use a window of at most {batches // 3 or 1} batches or read more "
            "data"
        )
    measured = (windows - 1) * window
    if measured <= prefetched:
        return (
            f"the {windows - 1} window(s) after the first hold {measured} batches, no more than "
            f"the {prefetched} the loader can have ready in advance, so they time a queue, not "
            "loading; use longer windows or read more data"
        )
    return None


def _stats(times: Sequence[float]) -> tuple[float, float]:
    """Mean and sample variance of ``times`` without the first (0 variance with one left)."""
    measured = list(times[1:]) if len(times) > 1 else list(times)
    if not measured:
        return 0.0, 0.0
    mean = statistics.fmean(measured)
    var = statistics.variance(measured) if len(measured) > 1 else 0.0
    return mean, var


def bench_loader(
    loader: Iterable[Any],
    *,
    batches: int | None = None,
    window: int = 100,
    step: Step | None = None,
    compare: bool | None = None,
    nbytes: Callable[[Any], int] | None = None,
    batch_len: Callable[[Any], int] = batch_samples,
    synchronize: Callable[[], Any] | None = None,
    progress: bool = False,
    config: dict[str, Any] | None = None,
    prefetched: int = 0,
) -> BenchResult:
    """Time ``loader`` (one pass, or ``batches`` batches) with ``step`` run on every batch.

    Args:
        loader: any iterable of batches.
        batches: stop after this many batches (None: one full pass).
        window: batches per timed window.
        step: the training step (default: nothing).
        compare: also time ``step`` on the first batch repeated (default: when ``step`` is
            given); skipped for a run too short to measure.
        nbytes: payload bytes of a batch (None: MB/s is not reported).
        batch_len: samples in a batch (default: length of the first field).
        synchronize: called before each time stamp (e.g. ``torch.cuda.synchronize``), so
            asynchronous GPU work is counted in the window it belongs to.
        progress: show a tqdm bar on stderr.
        config: recorded in the result as it is.
        prefetched: batches the loader may hold ready ahead of the consumer (a DataLoader:
            ``num_workers * prefetch_factor``); measured windows holding no more batches than
            this could be served from that queue alone, so such a run is too short.

    Returns:
        The measurements (rates None and ``too_short`` set when the run is too short).

    Raises:
        ConfigError: ``window`` < 1, ``batches`` < 1, or the loader yields no batch.
    """
    if window < 1:
        raise ConfigError(f"bench: window must be >= 1, got {window}")
    if batches is not None and batches < 1:
        raise ConfigError(f"bench: batches must be >= 1, got {batches}")
    step = step or _noop
    compare = (step is not _noop) if compare is None else compare
    sync = synchronize or (lambda: None)
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=batches, unit="batch", desc="bench", leave=False)
    count = samples = total_bytes = 0
    marks: list[tuple[float, int, int]] = []  # (time, samples, bytes) at each window end
    first_batch: Any = None
    start = time.perf_counter()
    for batch in loader:
        if first_batch is None:
            first_batch = batch
        step(batch)
        count += 1
        samples += batch_len(batch)
        if nbytes is not None:
            total_bytes += nbytes(batch)
        if bar is not None:
            bar.update(1)
        if count % window == 0:
            sync()
            marks.append((time.perf_counter(), samples, total_bytes))
        if batches is not None and count >= batches:
            break
    sync()
    end = time.perf_counter()
    if bar is not None:
        bar.close()
    if count == 0:
        raise ConfigError("bench: the loader yielded no batch")
    stamps = [start] + [m[0] for m in marks]
    window_times = [b - a for a, b in itertools.pairwise(stamps)]
    seconds = end - start
    too_short = _too_short(count, window, len(marks), prefetched)
    timeline = [(m[0] - start, m[1]) for m in marks]
    result = BenchResult(
        batches=count,
        samples=samples,
        nbytes=total_bytes if nbytes is not None else None,
        seconds=seconds,
        window=window,
        window_times=window_times,
        window_mean=None,
        window_variance=None,
        samples_per_s=None,
        mb_per_s=None,
        wall_samples_per_s=samples / seconds if seconds > 0 else 0.0,
        wall_mb_per_s=(total_bytes / 1e6 / seconds if seconds > 0 else 0.0)
        if nbytes is not None
        else None,
        too_short=too_short,
        config=dict(config or {}),
        timeline=timeline,
    )
    if too_short is None:
        # steady state: from the end of the first window to the end of the last one
        span = marks[-1][0] - marks[0][0]
        result.window_mean, result.window_variance = _stats(window_times)
        result.samples_per_s = (marks[-1][1] - marks[0][1]) / span if span > 0 else 0.0
        if nbytes is not None:
            result.mb_per_s = (marks[-1][2] - marks[0][2]) / 1e6 / span if span > 0 else 0.0
    if compare and too_short is None:  # a run too short to measure has nothing to compare
        _compare(result, first_batch, step, count, window, sync)
    return result


def _compare(
    result: BenchResult, batch: Any, step: Step, count: int, window: int, sync: Callable[[], Any]
) -> None:
    """Time ``step`` on ``batch`` repeated ``count`` times, in windows; fill the step fields."""
    times: list[float] = []
    sync()
    last = time.perf_counter()
    for i in range(1, count + 1):
        step(batch)
        if i % window == 0:
            sync()
            now = time.perf_counter()
            times.append(now - last)
            last = now
    mean, var = _stats(times)
    result.step_window_mean = mean
    result.step_window_variance = var
    loader_mean = result.window_mean
    if loader_mean is not None and mean > 0:
        result.loader_to_step_ratio = loader_mean / mean


def payload_nbytes(sample: dict[str, Any]) -> dict[str, Any]:
    """Add ``__nbytes__``: the summed size of the sample's ``bytes`` fields (before decode)."""
    sample["__nbytes__"] = sum(
        len(v) for k, v in sample.items() if not k.startswith("__") and isinstance(v, bytes)
    )
    return sample


class _StripBytes:
    """Split the ``__nbytes__`` column off the end of a tuple batch (picklable)."""

    def __call__(self, batch: Any) -> Any:
        return batch[:-1]


def bench_urls(
    urls: str | Iterable[str],
    *,
    batch_size: int = 64,
    num_workers: int = 4,
    batches: int | None = None,
    window: int = 100,
    decode: Any = None,
    fields: Sequence[str] | None = None,
    shuffle_buffer: int = 1000,
    step: Step | None = None,
    compare: bool | None = None,
    progress: bool = False,
    profile: bool = False,
    trace: str | None = None,
    **loader_kw: Any,
) -> BenchResult:
    """Benchmark :func:`~wds_cloud.pytorch.builder.make_loader` over ``urls`` (any backend).

    Args:
        urls: shard URLs, brace pattern, glob or prefix (local, s3, gs, ais, pipe, http...).
        batch_size: samples per batch.
        num_workers: DataLoader workers.
        batches: stop after this many batches (None: one pass over the shards).
        window: batches per timed window.
        decode: decode spec (``"rgb8"``, ``"torchrgb"``...); None: no decode (raw bytes).
        fields: fields to deliver (``to_tuple``); None: whole samples (dicts).
        shuffle_buffer: sample shuffle buffer (0: none).
        step: the training step (default: nothing).
        compare: also time ``step`` on one cached batch (default: when ``step`` is given).
        progress: tqdm bar on stderr.
        profile: profile the loader (``docs/observability.md``): the result's ``profile`` is
            its report, and its table ends with the per-stage table and the verdict.
        trace: write the loader's Chrome/Perfetto trace to this path (implies ``profile``).
        **loader_kw: more ``make_loader`` arguments (``resampled``, ``epoch_size``...).

    Returns:
        The measurements; bytes are the sample payloads before decode. A run whose windows
        after the first hold no more than ``num_workers * prefetch_factor`` batches is too
        short (see :func:`bench_loader`).
    """
    from wds_cloud.pytorch.builder import make_loader

    def nbytes_tuple(batch: Any) -> int:
        return int(sum(batch[-1]))

    def nbytes_dict(batch: Any) -> int:
        return int(sum(batch["__nbytes__"]))

    def samples_in(batch: Any) -> int:
        return len(batch[-1]) if isinstance(batch, tuple | list) else len(batch["__nbytes__"])

    to_tuple = (*fields, "__nbytes__") if fields else None
    loader = make_loader(
        urls,
        batch_size=batch_size,
        num_workers=num_workers,
        shuffle_buffer=shuffle_buffer,
        decode=decode,
        to_tuple=to_tuple,
        raw_map=payload_nbytes,
        profile=True if profile or trace else None,
        **loader_kw,
    )
    user_step = step
    if user_step is not None and fields:
        strip = _StripBytes()

        def stepped(batch: Any) -> Any:
            return user_step(strip(batch))

        step = stepped
    config = {
        "urls": redact_url(urls) if isinstance(urls, str) else [redact_url(u) for u in urls],
        "batch_size": batch_size,
        "num_workers": num_workers,
        "decode": decode,
        "fields": list(fields) if fields else None,
        "shuffle_buffer": shuffle_buffer,
    }
    result = bench_loader(
        loader,
        batches=batches,
        window=window,
        step=step,
        compare=compare,
        nbytes=nbytes_tuple if fields else nbytes_dict,
        batch_len=samples_in,
        progress=progress,
        config=config,
        prefetched=num_workers * int(loader_kw.get("prefetch_factor", 2)) if num_workers else 0,
    )
    if getattr(loader, "profiling", False):
        result.profile = loader.profile_report()
        if trace is not None:
            loader.export_trace(trace)
    return result
