"""The ledger of a tracked ``RandomMix`` on the object iterated (see
:mod:`wds_cloud.resume.mixing`): per dataset what was pulled at the boundary and delivered at
the top, per mixer its RNG position and the samples it pulled that were not delivered."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from wds_cloud.resume.plan import MixPlan
from wds_cloud.resume.state import STATE_FORMAT, merge_intervals

#: First element of the mark a mixer puts before the ids of each item.
MIX = "\x00mix"


class MixLedger:
    """What was pulled at the boundary and delivered at the top, per dataset and mixer."""

    def __init__(self, header: dict[str, Any], mix: MixPlan) -> None:
        self.header = header
        self.delivered: list[Any] = []
        self.pulled: list[Any] = []
        for found in mix.readers:
            assert found is not None and found.source is not None
            source = found.source
            e, order = source.order()
            sub = {"epoch": e, "seed": getattr(found.pipeline, "seed", 0), "generation": 0}
            self.delivered.append(source.new_ledger(dict(sub), order))
            self.pulled.append(source.new_ledger(dict(sub), order))
        self.positions: dict[str, list[Any]] = {}  # mixer -> [draws, exhausted]
        self.extents: dict[str, list[dict[str, list[list[int]]]]] = {}
        self.left: dict[str, list[Any]] = {}  # loaded, not handed out again yet
        self._since = 0

    def _route(self, ids: Iterable[Any], pulled: bool) -> None:
        ledgers = self.pulled if pulled else self.delivered
        target: Any = None
        extents: Any = None
        batch: list[Any] = []
        for sid in ids:
            if sid[0] == MIX:
                if batch:
                    target.add(batch)
                    batch = []
                _, mixer, i, draws, exhausted = sid
                target = ledgers[i]
                if pulled:
                    if draws is not None:
                        self.positions[mixer] = [draws, list(exhausted)]
                    per = self.extents.setdefault(mixer, [{} for _ in ledgers])
                    extents = per[i]
            else:
                batch.append(sid)
                if extents is not None:
                    extents.setdefault(sid[0], []).append([sid[1], sid[2]])
        if batch:
            if target is None:
                raise RuntimeError("resume: a RandomMix item came without its mark")
            target.add(batch)

    def pull(self, ids: Iterable[Any]) -> None:
        """Record ids pulled at the boundary."""
        self._route(ids, True)
        self._since += 1
        if self._since > 4096:
            self._compact()

    def _compact(self) -> None:
        """Merge the pulled extents; drop those of shards delivered whole."""
        self._since = 0
        for per in self.extents.values():
            for i, keys in enumerate(per):
                done = self.delivered[i].done
                for key in list(keys):
                    if key in done:
                        del keys[key]
                    else:
                        keys[key] = merge_intervals(keys[key])

    def add(self, ids: Iterable[Any]) -> None:
        """Record delivered ids."""
        self._route(ids, False)

    def _left(self, mixer: str, i: int) -> list[list[Any]]:
        """Samples ``mixer`` pulled from dataset ``i`` that were not delivered (those pulled
        since the pass started or resumed, and those a loaded state listed)."""
        ledger = self.delivered[i]
        ledger.compact()
        wanted: dict[str, list[list[int]]] = {}
        pulled = self.extents.get(mixer)
        if pulled:
            for key, ivs in pulled[i].items():
                wanted.setdefault(key, []).extend(ivs)
        loaded = self.left.get(mixer)
        if loaded:
            for key, flat in loaded[i]:
                wanted.setdefault(key, []).extend(_pairs(flat))
        out: list[list[Any]] = []
        for key in sorted(wanted):
            if key in ledger.done:
                continue
            rest = _subtract(merge_intervals(wanted[key]), ledger.intervals.get(key, []))
            if rest:
                out.append([key, [x for iv in rest for x in iv]])
        return out

    def state(self) -> dict[str, Any]:
        """The JSON-serialisable state."""
        datasets = []
        for d, p in zip(self.delivered, self.pulled, strict=True):
            ds, ps = d.state(), p.state()
            ds.pop("format", None)
            ps.pop("format", None)
            datasets.append({"delivered": ds, "pulled": ps})
        mixers = {}
        for mixer in sorted(set(self.positions) | set(self.extents) | set(self.left)):
            draws, exhausted = self.positions.get(mixer, [0, []])
            mixers[mixer] = {
                "draws": draws,
                "exhausted": exhausted,
                "left": [self._left(mixer, i) for i in range(len(self.delivered))],
            }
        return {
            "format": STATE_FORMAT,
            **self.header,
            "delivered": sum(d.delivered for d in self.delivered),
            "datasets": datasets,
            "mixers": mixers,
        }

    def load(self, state: dict[str, Any]) -> None:
        """Start from ``state``."""
        for i, sub in enumerate(state["datasets"]):
            self.delivered[i].load(sub["delivered"])
            self.pulled[i].load(sub["pulled"])
        for mixer, d in state.get("mixers", {}).items():
            self.positions[mixer] = [int(d["draws"]), list(d["exhausted"])]
            self.left[mixer] = d.get("left", [])


def _pairs(flat: list[int]) -> list[list[int]]:
    return [[flat[k], flat[k + 1]] for k in range(0, len(flat), 2)]


def _subtract(a: list[list[int]], b: list[list[int]]) -> list[list[int]]:
    """Intervals of ``a`` not covered by ``b`` (both merged and sorted)."""
    out: list[list[int]] = []
    j = 0
    for lo, hi in a:
        cur = lo
        while j < len(b) and b[j][1] <= cur:
            j += 1
        k = j
        while k < len(b) and b[k][0] < hi:
            if b[k][0] > cur:
                out.append([cur, b[k][0]])
            cur = max(cur, b[k][1])
            k += 1
        if cur < hi:
            out.append([cur, hi])
    return out
