"""What a job did: per-task results, their sum, the progress line and the closing summary."""

from __future__ import annotations

import sys
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

#: Example keys kept per skip reason (the counts are always complete).
EXAMPLES_PER_REASON = 3
#: Skip reasons listed in the text summary (the JSON summary has them all).
MAX_REASONS_SHOWN = 10


@dataclass
class TaskResult:
    """What one task read, wrote and skipped.

    Attributes:
        index: the task's number in the plan.
        output: the shard it committed (None: every sample was skipped, nothing written).
        samples_in: samples read.
        samples_out: samples written.
        bytes_in: input bytes read (tar bytes of the samples, or file/column bytes).
        bytes_out: uncompressed tar bytes written.
        skipped: skip reason -> count.
        examples: skip reason -> a few keys of skipped samples.
        extra: job-specific fields (index and verify reports).
    """

    index: int
    output: str | None = None
    samples_in: int = 0
    samples_out: int = 0
    bytes_in: int = 0
    bytes_out: int = 0
    skipped: dict[str, int] = field(default_factory=dict)
    examples: dict[str, list[str]] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)

    def skip(self, reason: str, key: Any) -> None:
        """Count one skipped sample under ``reason``."""
        self.skipped[reason] = self.skipped.get(reason, 0) + 1
        keys = self.examples.setdefault(reason, [])
        if len(keys) < EXAMPLES_PER_REASON:
            keys.append(str(key))

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TaskResult:
        return cls(**data)


@dataclass
class JobSummary:
    """The sum of a job's task results.

    Attributes:
        kind: ``convert``, ``reshard``, ``map``, ``index`` or ``verify``.
        tasks: every task's result, by task number (those skipped as already committed too).
        resumed: tasks found committed in the manifest and not run again.
        seconds: wall time of this run.
        manifest: where the manifest of committed outputs is (None: no manifest).
        extra: job-specific fields (the dataset JSON of ``index``).
    """

    kind: str
    tasks: list[TaskResult] = field(default_factory=list)
    resumed: int = 0
    seconds: float = 0.0
    manifest: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def samples_in(self) -> int:
        return sum(t.samples_in for t in self.tasks)

    @property
    def samples_out(self) -> int:
        return sum(t.samples_out for t in self.tasks)

    @property
    def bytes_in(self) -> int:
        return sum(t.bytes_in for t in self.tasks)

    @property
    def bytes_out(self) -> int:
        return sum(t.bytes_out for t in self.tasks)

    @property
    def shards(self) -> list[str]:
        """The committed output shards, in task order."""
        return [t.output for t in sorted(self.tasks, key=lambda t: t.index) if t.output]

    @property
    def skipped(self) -> dict[str, int]:
        """Skip reason -> count over all tasks."""
        total: Counter[str] = Counter()
        for t in self.tasks:
            total.update(t.skipped)
        return dict(sorted(total.items(), key=lambda kv: (-kv[1], kv[0])))

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "samples_in": self.samples_in,
            "samples_out": self.samples_out,
            "skipped": self.skipped,
            "shards": self.shards,
            "bytes_in": self.bytes_in,
            "bytes_out": self.bytes_out,
            "tasks": len(self.tasks),
            "resumed": self.resumed,
            "seconds": round(self.seconds, 3),
            "manifest": self.manifest,
            **self.extra,
        }

    def text(self) -> str:
        """The closing summary, a few lines."""
        skipped = self.skipped
        if self.kind in ("index", "verify"):  # they read shards and write no shard
            read = f", {self.bytes_in / 1e6:.1f} MB" if self.bytes_in else ""
            return (
                f"{self.kind}: {len(self.tasks)} shards, {self.samples_in} samples{read} "
                f"in {self.seconds:.2f} s"
            )
        lines = [
            f"{self.kind}: {self.samples_in} samples in, {self.samples_out} out, "
            f"{sum(skipped.values())} skipped; {len(self.shards)} shards written "
            f"({self.bytes_out / 1e6:.1f} MB) from {self.bytes_in / 1e6:.1f} MB read "
            f"in {self.seconds:.2f} s"
            + (f"; {self.resumed} tasks already committed" if self.resumed else "")
        ]
        examples: dict[str, list[str]] = {}
        for t in self.tasks:
            for reason, keys in t.examples.items():
                examples.setdefault(reason, []).extend(keys)
        for reason, count in list(skipped.items())[:MAX_REASONS_SHOWN]:
            shown = ", ".join(examples.get(reason, [])[:EXAMPLES_PER_REASON])
            lines.append(f"  skipped {count}: {reason}" + (f" (e.g. {shown})" if shown else ""))
        if len(skipped) > MAX_REASONS_SHOWN:
            rest = list(skipped.values())[MAX_REASONS_SHOWN:]
            lines.append(f"  skipped {sum(rest)} more for {len(rest)} other reasons")
        return "\n".join(lines)


class Progress:
    """Progress on stderr: a tqdm bar on a terminal, else a line at most every few seconds.

    Args:
        kind: the job's name, shown first.
        total: tasks to run.
        enabled: False prints nothing.
        every: seconds between plain lines when stderr is not a terminal.
        writes: the job writes shards (counts samples and bytes written; else those read).
    """

    def __init__(
        self, kind: str, total: int, *, enabled: bool, every: float = 5.0, writes: bool = True
    ) -> None:
        self.kind = kind
        self.writes = writes
        self.total = total
        self.enabled = enabled
        self.every = every
        self.done = self.samples = self.bytes = self.shards = 0
        self._last = time.monotonic()
        self._bar: Any = None
        if enabled and sys.stderr.isatty():
            from tqdm import tqdm

            self._bar = tqdm(total=total, desc=kind, unit="task", leave=False, file=sys.stderr)

    def update(self, result: TaskResult) -> None:
        """Count one finished task."""
        self.done += 1
        if self.writes:
            self.samples += result.samples_out
            self.bytes += result.bytes_out
            self.shards += result.output is not None
        else:
            self.samples += result.samples_in
            self.bytes += result.bytes_in
            self.shards += 1
        if not self.enabled:
            return
        done = "written" if self.writes else "read"
        status = f"{self.samples} samples, {self.bytes / 1e6:.1f} MB, {self.shards} shards {done}"
        if self._bar is not None:
            self._bar.set_postfix_str(status, refresh=False)
            self._bar.update(1)
        elif time.monotonic() - self._last >= self.every or self.done == self.total:
            self._last = time.monotonic()
            print(f"{self.kind}: {self.done}/{self.total} tasks, {status}", file=sys.stderr)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()


__all__ = ["JobSummary", "Progress", "TaskResult"]
