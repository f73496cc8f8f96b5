""":class:`TuneResult`: the chosen setting, its measured rate, every trial, and the
``make_loader(...)`` call to paste (:meth:`TuneResult.as_code`)."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any

from wds_cloud.tools.tune.space import Setting
from wds_cloud.tools.tune.trial import Trial

__all__ = ["TuneResult", "format_bytes"]

_MIB = 1 << 20


def format_bytes(n: int) -> str:
    """``n`` bytes for people: ``512 KiB``, ``16 MiB``, ``1.5 GiB``."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", _MIB), ("KiB", 1 << 10)):
        if n >= scale:
            value = n / scale
            return (
                f"{value:.0f} {unit}"
                if value >= 100 or value == int(value)
                else f"{value:.1f} {unit}"
            )
    return f"{n} B"


def _literal(value: Any) -> bool:
    """Whether ``repr(value)`` is Python source that gives ``value`` back."""
    try:
        return bool(ast.literal_eval(repr(value)) == value)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return False


def _readahead_source(n: int) -> str:
    return repr(f"{n // _MIB}M") if n and n % _MIB == 0 else str(n)


@dataclass
class TuneResult:
    """What :func:`~wds_cloud.tools.tune.tune` found.

    Attributes:
        urls: the shards tuned on, as given.
        setting: the chosen setting.
        samples_per_s: its measured steady-state rate.
        memory: its peak memory (PSS of the process tree, bytes).
        trials: every trial, in the order run (skipped settings included).
        budget: the memory budget (bytes).
        seconds: the tuning's wall time.
        verdict: the profiler's verdict on the first trial (what the search moved first).
        fixed: the ``make_loader`` arguments the caller gave (kept as they are).
        grid_size: settings in the full grid of this search space.
    """

    urls: Any
    setting: Setting
    samples_per_s: float
    memory: int
    trials: list[Trial]
    budget: int
    seconds: float
    verdict: str | None = None
    fixed: dict[str, Any] = field(default_factory=dict)
    grid_size: int = 0

    def kwargs(self) -> dict[str, Any]:
        """The tuned ``make_loader`` keyword arguments (those the caller did not fix)."""
        return {k: v for k, v in self.setting.loader_kwargs().items() if k not in self.fixed}

    def as_code(self) -> str:
        """Python source that builds the tuned loader: the caller's literal arguments and the
        tuned ones. Arguments that are not literals (functions) are named in a comment."""
        args = [repr(self.urls) if _literal(self.urls) else "urls"]
        own = []
        for name, value in self.fixed.items():
            if _literal(value):
                args.append(f"{name}={value!r}")
            else:
                own.append(name)
        for name, value in self.setting.loader_kwargs().items():
            if name in self.fixed:
                continue
            if name == "registry":
                args.append(
                    f"registry=wds.OpenerRegistry(readahead={_readahead_source(self.setting.readahead or 0)})"
                )
            else:
                args.append(f"{name}={value!r}")
        lines = [
            "import wds_cloud as wds",
            "",
            f"# tuned: {self.samples_per_s:,.0f} samples/s, {format_bytes(self.memory)} "
            f"(budget {format_bytes(self.budget)})",
        ]
        if own:
            lines.append(f"# also pass your own: {', '.join(own)}")
        if args[0] == "urls":
            lines.append(f"urls = ...  # {type(self.urls).__name__} of shards")
        lines.append("loader = wds.make_loader(")
        lines += [f"    {a}," for a in args]
        lines.append(")")
        return "\n".join(lines) + "\n"

    def table(self) -> str:
        """Every trial, one row each; the chosen one marked ``*``."""
        axes = [k for k in self.setting.values() if getattr(self.setting, k) is not None]
        names = {
            "num_workers": "workers",
            "prefetch_factor": "pf",
            "inner_batch": "inner",
            "shm_batches": "shm",
            "readahead": "readahead",
            "prefetch": "prefetch",
        }
        head = [" ", *(names[a] for a in axes), "samples/s", "memory", "status"]
        rows = [head]
        for trial in self.trials:
            values = trial.setting.values()
            cells = []
            for a in axes:
                v = values[a]
                if a == "readahead":
                    cells.append(format_bytes(v) if v else "0")
                elif a in ("prefetch_factor", "shm_batches") and trial.setting.num_workers == 0:
                    cells.append("-")
                else:
                    cells.append(str(v))
            rate = "-" if trial.samples_per_s is None else f"{trial.samples_per_s:,.0f}"
            mark = "*" if trial.ok and trial.setting == self.setting else " "
            status = trial.status if len(trial.status) < 60 else trial.status[:57] + "..."
            rows.append([mark, *cells, rate, format_bytes(trial.memory), status])
        widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
        lines = [
            "  ".join(
                c.rjust(w) if i else c for i, (c, w) in enumerate(zip(r, widths, strict=True))
            ).rstrip()
            for r in rows
        ]
        summary = (
            f"{len(self.trials)} trials in {self.seconds:.0f} s (grid: {self.grid_size} settings), "
            f"budget {format_bytes(self.budget)}; best: {self.samples_per_s:,.0f} samples/s"
        )
        if self.verdict:
            summary += f"\nfirst trial's verdict: {self.verdict}"
        return "\n".join(lines) + "\n" + summary

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-compatible values (the code as text)."""
        return {
            "setting": self.setting.values(),
            "samples_per_s": self.samples_per_s,
            "memory": self.memory,
            "budget": self.budget,
            "seconds": self.seconds,
            "verdict": self.verdict,
            "grid_size": self.grid_size,
            "trials": [
                {
                    **t.setting.values(),
                    "status": t.status,
                    "samples_per_s": t.samples_per_s,
                    "memory": t.memory,
                    "seconds": t.seconds,
                }
                for t in self.trials
            ],
            "code": self.as_code(),
        }
