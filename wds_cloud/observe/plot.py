"""``wds-cloud bench --plot out.png``: samples/s over time and the per-stage breakdown.

Needs matplotlib, the ``[plot]`` extra (``pip install 'wds_cloud[plot]'``); drawn with the
non-interactive ``Agg`` backend, so it works without a display.
"""

from __future__ import annotations

import itertools
import os
from typing import Any

from wds_cloud.errors import MissingDependencyError
from wds_cloud.observe.profile import CONSUMER, IDLE

__all__ = ["plot_bench"]


def _pyplot() -> Any:
    try:
        import matplotlib
    except ImportError as exc:
        raise MissingDependencyError(
            "plotting needs matplotlib: pip install 'wds_cloud[plot]'"
        ) from exc
    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    return plt


def plot_bench(result: Any, path: str | os.PathLike[str]) -> None:
    """Draw ``result`` (a :class:`~wds_cloud.tools.bench.BenchResult`, profiled) to ``path``:
    left, samples/s in each window against time; right, the share of time per stage in the
    main process and in the workers, with the verdict as the title.

    Raises:
        MissingDependencyError: matplotlib is not installed.
    """
    plt = _pyplot()
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4), dpi=80)
    points = [(0.0, 0), *result.timeline]
    times, rates = [], []
    for (t0, n0), (t1, n1) in itertools.pairwise(points):
        if t1 > t0:
            times.append(t1)
            rates.append((n1 - n0) / (t1 - t0))
    left.plot(times, rates, marker="o", markersize=3)
    left.set_xlabel("seconds")
    left.set_ylabel("samples/s (per window)")
    left.set_title("throughput")
    left.grid(True, alpha=0.3)
    report = result.profile
    if report is not None:
        groups = [("main", report.stages(False))]
        if report.workers:
            groups.append(("workers", report.stages(True)))
        names = sorted({s for _, stages in groups for s in stages})
        bottom = [0.0] * len(groups)
        for name in names:
            shares = []
            for _, stages in groups:
                total = sum(stages.values())
                shares.append(stages.get(name, 0.0) / total if total > 0 else 0.0)
            hatch = "//" if name in (CONSUMER, IDLE) else None
            right.bar([g for g, _ in groups], shares, bottom=bottom, label=name, hatch=hatch)
            bottom = [b + s for b, s in zip(bottom, shares, strict=True)]
        right.set_ylabel("share of time")
        right.set_ylim(0, 1)
        right.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.0, 0.5))
        fig.suptitle(report.verdict(), fontsize=9)
    right.set_title("where the time goes")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
