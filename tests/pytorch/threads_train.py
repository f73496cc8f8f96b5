"""A training loop for the thread executor's SIGKILL test:
``python threads_train.py URLS_JSON CKPT LOG EXECUTOR EPOCH_SIZE``.

Iterates ``make_loader`` (2 readers, shuffle buffers in the readers and after them) for two
``iter()``s (epochs), appends each delivered key to LOG (flushed), and every 3 steps saves
``{"epoch", "lines", "loader"}`` to CKPT atomically. On start it resumes from CKPT when it
exists, cutting LOG back to the lines of that checkpoint (what was delivered after it is lost,
as in training). ``EPOCH_SIZE`` 0: one pass over the shards per epoch.
"""

from __future__ import annotations

import json
import os
import sys

import wds_cloud as wds


def main() -> None:
    urls = json.loads(sys.argv[1])
    ckpt, log, executor, epoch_size = sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
    loader = wds.make_loader(
        urls,
        batch_size=5,
        num_workers=2,
        shuffle_buffer=12,
        seed=11,
        to_tuple=("txt",),
        collate=list,
        epoch_size=epoch_size or None,
        executor=executor,
    )
    lines, first_epoch, step = 0, 0, 0
    if os.path.exists(ckpt):
        with open(ckpt) as f:
            saved = json.load(f)
        loader.load_state_dict(saved["loader"])
        lines, first_epoch = saved["lines"], saved["epoch"]
    with open(log, "r+" if os.path.exists(log) else "w") as out:
        out.truncate(sum(len(x) for x in open(log).readlines()[:lines]) if lines else 0)
        out.seek(0, os.SEEK_END)
        for epoch in range(first_epoch, 2):
            loader.set_epoch(epoch)
            for batch in loader:
                step += 1
                for (txt,) in batch:
                    out.write(txt.decode() + "\n")
                    lines += 1
                out.flush()
                if step % 3 == 0:
                    tmp = ckpt + ".tmp"
                    state = {"epoch": epoch, "lines": lines, "loader": loader.state_dict()}
                    with open(tmp, "w") as f:
                        json.dump(state, f)
                    os.replace(tmp, ckpt)
                print(f"step {step}", flush=True)
    print("done", flush=True)


if __name__ == "__main__":
    main()
