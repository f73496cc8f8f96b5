"""Run Megatron-Energon's own ``PackingDataset`` on given lengths (``bench_pack.py --energon``).

``python _energon_pack.py IN.json OUT.json`` in a venv with ``megatron-energon``: IN holds
``{"capacity", "runs": [{"name", "buffer", "lengths"}]}``; OUT gets, per run, the packs (sample
indices) and the samples/s of iterating the dataset. The selection is textbook
first-fit-decreasing (longest first, stable; each into the first bin with room; every bin
returned), the ``select_samples_to_pack`` the test's reference implements.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator
from typing import Any


def main() -> None:
    from megatron.energon import WorkerConfig
    from megatron.energon.flavors.base_dataset import SavableDataset
    from megatron.energon.wrappers.packing_dataset import PackingDataset

    spec = json.loads(open(sys.argv[1]).read())
    capacity = int(spec["capacity"])

    class Lengths(SavableDataset):  # type: ignore[misc]  # Energon's untyped base class
        def __init__(self, lengths: list[int], worker_config: Any) -> None:
            super().__init__(worker_config=worker_config)
            self.lengths = lengths

        def len_worker(self, worker_idx: int | None = None) -> int:
            return len(self.lengths)

        def reset_state_own(self) -> None:
            pass

        def worker_has_samples(self) -> bool:
            return True

        def config(self) -> dict[str, Any]:
            return {"type": "Lengths"}

        def __iter__(self) -> Iterator[dict[str, Any]]:
            for i, n in enumerate(self.lengths):
                yield {"i": i, "n": n, "__restore_key__": ("Lengths", i)}

    def ffd(samples: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
        bins: list[list[dict[str, Any]]] = []
        fill: list[int] = []
        for s in sorted(samples, key=lambda s: -s["n"]):
            for b, used in enumerate(fill):
                if used + s["n"] <= capacity:
                    bins[b].append(s)
                    fill[b] += s["n"]
                    break
            else:
                bins.append([s])
                fill.append(s["n"])
        return bins

    def indices(pack: list[dict[str, Any]]) -> list[int]:
        return [s["i"] for s in pack]

    out = []
    for run in spec["runs"]:
        wc = WorkerConfig(rank=0, world_size=1, num_workers=0)
        ds = PackingDataset(
            Lengths(run["lengths"], wc),
            int(run["buffer"]),
            pre_packer=ffd,
            final_packer=indices,
            final_packer_stateless=True,
            worker_config=wc,
        )
        wc.worker_activate(0)  # as a DataLoader worker does; Energon's sample indices need it
        start = time.perf_counter()
        packs = list(ds)
        seconds = time.perf_counter() - start
        wc.worker_deactivate()
        out.append({"packs": packs, "samples_per_s": len(run["lengths"]) / seconds})
    with open(sys.argv[2], "w") as f:
        json.dump(out, f)


if __name__ == "__main__":
    main()
