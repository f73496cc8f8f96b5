"""A loop for the packing SIGKILL tests: ``python packing_loop.py MODE URLS_JSON CKPT LOG``.

Iterates a resumable ``WebDataset`` with a ``pack`` (MODE ``pack``) or ``group_by`` (MODE
``group``) stage, appends the keys of each delivered output to LOG (one line, flushed) and every
3 steps saves ``{"lines", "state"}`` to CKPT atomically. On start it resumes from CKPT when it
exists, cutting LOG back to the lines of that checkpoint (what came after it is lost, as in
training).
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import wds_cloud as wds


def tokens(sample: dict[str, Any]) -> int:
    """The sample's length: its ``tok`` field's size."""
    return len(sample["tok"])


def bucket(sample: dict[str, Any]) -> bytes:
    """The sample's group: its ``res`` field."""
    return bytes(sample["res"])


def concat(pack: list[dict[str, Any]]) -> dict[str, Any]:
    """A pack as one sample: the keys, the tokens concatenated and their segment ids."""
    return {
        "keys": [s["__key__"] for s in pack],
        "tok": b"".join(s["tok"] for s in pack),
        "segments": [n for n, s in enumerate(pack) for _ in s["tok"]],
    }


def dataset(mode: str, urls: list[str]) -> Any:
    """The pipeline of ``mode``."""
    ds = wds.WebDataset(urls, shardshuffle=True, seed=17)
    if mode == "pack":
        return ds.pack(100, length=tokens, buffer=12, pack_fn=concat)
    return ds.group_by(bucket, 4, buffer=10).map(
        lambda group: {"keys": [s["__key__"] for s in group]}
    )


def main() -> None:
    mode, urls = sys.argv[1], json.loads(sys.argv[2])
    ckpt, log = sys.argv[3], sys.argv[4]
    ds = dataset(mode, urls)
    lines = 0
    if os.path.exists(ckpt):
        with open(ckpt) as f:
            saved = json.load(f)
        ds.load_state_dict(saved["state"])
        lines = saved["lines"]
    with open(log, "r+" if os.path.exists(log) else "w") as out:
        out.truncate(sum(len(x) for x in open(log).readlines()[:lines]) if lines else 0)
        out.seek(0, os.SEEK_END)
        for step, item in enumerate(ds, 1):
            out.write(",".join(item["keys"]) + "\n")
            out.flush()
            lines += 1
            if step % 3 == 0:
                tmp = ckpt + ".tmp"
                with open(tmp, "w") as f:
                    json.dump({"lines": lines, "state": ds.state_dict()}, f)
                os.replace(tmp, ckpt)
            print(f"step {step}", flush=True)
    print("done", flush=True)


if __name__ == "__main__":
    main()
