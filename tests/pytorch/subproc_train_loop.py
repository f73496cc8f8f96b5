"""A training loop for the parent-SIGKILL test: ``python subproc_train_loop.py URLS_JSON CKPT LOG``.

Iterates ``make_loader(executor="subprocess-threads")``, prints the child's pid, appends each
delivered key to LOG (flushed) and every 3 steps saves ``{"lines", "loader"}`` to CKPT
atomically; on start it resumes from CKPT, cutting LOG back to that checkpoint's lines.
"""

from __future__ import annotations

import json
import os
import sys

import wds_cloud as wds


def main() -> None:
    urls = json.loads(sys.argv[1])
    ckpt, log = sys.argv[2], sys.argv[3]
    loader = wds.make_loader(
        urls,
        batch_size=5,
        num_workers=2,
        shuffle_buffer=12,
        seed=23,
        to_tuple=("txt",),
        collate=list,
        executor="subprocess-threads",
    )
    lines = 0
    if os.path.exists(ckpt):
        with open(ckpt) as f:
            saved = json.load(f)
        loader.load_state_dict(saved["loader"])
        lines = saved["lines"]
    with open(log, "r+" if os.path.exists(log) else "w") as out:
        out.truncate(sum(len(x) for x in open(log).readlines()[:lines]) if lines else 0)
        out.seek(0, os.SEEK_END)
        for step, batch in enumerate(loader, 1):
            if step == 1:
                print(f"child {loader.pid}", flush=True)
            for (txt,) in batch:
                out.write(txt.decode() + "\n")
                lines += 1
            out.flush()
            if step % 3 == 0:
                tmp = ckpt + ".tmp"
                with open(tmp, "w") as f:
                    json.dump({"lines": lines, "loader": loader.state_dict()}, f)
                os.replace(tmp, ckpt)
            print(f"step {step}", flush=True)
    print("done", flush=True)


if __name__ == "__main__":
    main()
