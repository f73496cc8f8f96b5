"""The seed workflow end to end on AIStore: directory -> shards -> dSort -> ETL -> training.

1. A directory dataset in the Oxford-pets layout (``images/<name>.jpg``, ``trimaps/<name>.png``
   with values 1..3, ``classes.txt`` with ``<name> <class>`` lines); synthetic data is generated
   when the directory has none.
2. ``ShardWriter("ais://<bucket>/samples-%02d.tar", maxcount=...)`` uploads WebDataset shards
   (``<name>.image.jpg``, ``<name>.trimap.png``, ``<name>.cls``).
3. A dSort job shuffles the records across all shards into ``ais://<bucket>-shuffled/``.
4. ``WebDataset(urls, etl=<pets ETL>)`` reads the shuffled shards through the ETL, which
   resizes image and trimap (nearest) to ``--size`` and maps trimap 1,2,3 -> 0,1,2.
5. ``WebLoader(dataset, num_workers=N, batch_size=None).unbatched().shuffle(1000).batched(64)``
   feeds a tiny segmentation + classification model for ``--epochs`` epochs.

The ETL must be running in the cluster (``python -m etl.deploy pets``, or ``--deploy``);
``--no-etl`` skips it (a cluster without Kubernetes cannot run ETLs) and does its work in the
loader instead.
Usage::

    python examples/ais_pipeline.py --endpoint http://ais:51080 --data ./pets --samples 200

Prints one JSON line per stage (``written``, ``dsort``, ``epoch``) and a final ``summary``.
"""

from __future__ import annotations

import argparse
import functools
import io
import json
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

import wds_cloud as wds
from wds_cloud.aistore import dsort
from wds_cloud.openers.ais import AisOpener

NUM_CLASSES = 4


def make_dataset(root: Path, samples: int, seed: int = 0) -> None:
    """Synthetic pets-like data: an ellipse (class-coloured pet) on noise, with its trimap."""
    rng = np.random.default_rng(seed)
    (root / "images").mkdir(parents=True, exist_ok=True)
    (root / "trimaps").mkdir(parents=True, exist_ok=True)
    lines = []
    yy, xx = np.mgrid[0:48, 0:64]
    for i in range(samples):
        cls = i % NUM_CLASSES
        cx, cy, rx, ry = rng.integers(20, 44), rng.integers(16, 32), rng.integers(8, 16), 10
        d = ((xx - cx) / rx) ** 2 + ((yy - cy) / ry) ** 2
        trimap = np.where(d < 0.8, 1, np.where(d < 1.2, 3, 2)).astype(np.uint8)
        img = rng.integers(0, 80, (48, 64, 3), dtype=np.uint8)
        img[d < 1.0] = np.array([(60 * cls + 60) % 256, 200 - 40 * cls, 40 * cls], np.uint8)
        name = f"pet_{i:05d}"
        Image.fromarray(img).save(root / "images" / f"{name}.jpg", quality=90)
        Image.fromarray(trimap, mode="L").save(root / "trimaps" / f"{name}.png")
        lines.append(f"{name} {cls}")
    (root / "classes.txt").write_text("\n".join(lines) + "\n")


def write_shards(
    root: Path, bucket: str, maxcount: int, registry: wds.OpenerRegistry
) -> tuple[list[str], int]:
    """Upload the directory as shards; returns the shard URLs and the sample count."""
    with wds.ShardWriter(
        f"ais://{bucket}/samples-%02d.tar", maxcount=maxcount, registry=registry
    ) as sink:
        for line in (root / "classes.txt").read_text().split("\n"):
            if not line.strip():
                continue
            name, cls = line.split()
            sink.write(
                {
                    "__key__": name,
                    "image.jpg": (root / "images" / f"{name}.jpg").read_bytes(),
                    "trimap.png": (root / "trimaps" / f"{name}.png").read_bytes(),
                    "cls": int(cls),
                }
            )
        total = sink.total
    return list(sink.shards), total


def shuffle_shards(
    client: Any, bucket: str, shards: int, shard_bytes: int, registry: wds.OpenerRegistry
) -> tuple[list[str], Any]:
    """dSort shuffle of ``samples-00..`` into ``<bucket>-shuffled``; returns the new URLs."""
    spec = dsort.DsortSpec(
        input_bck=bucket,
        input_template=f"samples-{{00..{shards - 1:02d}}}.tar",
        output_bck=f"{bucket}-shuffled",
        output_format="shuffled-%02d.tar",
        output_shard_size=max(shard_bytes, 4096),
        algorithm="shuffle",
        seed="42",
    )
    result = dsort.wait(
        dsort.start(spec, client=client), timeout=600, progress=False, client=client
    )
    if not result.success:
        raise SystemExit(f"dSort failed: {result.errors}")
    return wds.list_shards(f"ais://{bucket}-shuffled/shuffled-*.tar", registry=registry), result


def to_arrays(
    sample: dict[str, Any], local_size: int | None = None
) -> tuple[np.ndarray, np.ndarray, int]:
    """ETL output -> (float32 CHW image in 0..1, int64 HW trimap in 0..2, class).

    With ``local_size`` the sample is the stored one and the ETL's work is done here: image
    resized bilinear, trimap nearest, trimap 1,2,3 -> 0,1,2 (``--no-etl``)."""
    image_pil = Image.open(io.BytesIO(sample["image.jpg"])).convert("RGB")
    trimap_pil = Image.open(io.BytesIO(sample["trimap.png"]))
    if local_size is not None:
        size = (local_size, local_size)
        image_pil = image_pil.resize(size, Image.Resampling.BILINEAR)
        trimap_pil = trimap_pil.resize(size, Image.Resampling.NEAREST)
    image = np.asarray(image_pil, np.float32)
    trimap = np.asarray(trimap_pil, np.int64) - (1 if local_size is not None else 0)
    return image.transpose(2, 0, 1) / 255.0, trimap, int(sample["cls"])


def train(
    urls: list[str], opts: argparse.Namespace, registry: wds.OpenerRegistry
) -> dict[str, Any]:
    """Train a tiny model through the ETL; returns samples seen per epoch and the losses."""
    import torch
    from torch import nn

    through_etl = {} if opts.no_etl else {"etl": opts.etl, "etl_args": {"size": opts.size}}
    dataset = (
        wds.WebDataset(urls, registry=registry, shardshuffle=True, empty_check=False, **through_etl)
        .map(functools.partial(to_arrays, local_size=opts.size if opts.no_etl else None))
        .batched(16)
    )
    loader = (
        wds.WebLoader(dataset, num_workers=opts.workers, batch_size=None)
        .unbatched()
        .shuffle(1000)
        .batched(64)
    )
    torch.manual_seed(0)
    body = nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 16, 3, padding=1), nn.ReLU()
    )
    seg_head, cls_head = nn.Conv2d(16, 3, 1), nn.Linear(16, NUM_CLASSES)
    params = [*body.parameters(), *seg_head.parameters(), *cls_head.parameters()]
    optim = torch.optim.Adam(params, lr=1e-2)
    epochs = []
    for epoch in range(opts.epochs):
        seen, loss_sum, steps = 0, 0.0, 0
        for images, trimaps, classes in loader:
            x, y, c = torch.as_tensor(images), torch.as_tensor(trimaps), torch.as_tensor(classes)
            feats = body(x)
            loss = nn.functional.cross_entropy(seg_head(feats), y) + nn.functional.cross_entropy(
                cls_head(feats.mean(dim=(2, 3))), c
            )
            optim.zero_grad()
            loss.backward()
            optim.step()
            seen += len(c)
            loss_sum += float(loss.detach())
            steps += 1
        record = {"epoch": epoch, "samples": seen, "steps": steps, "loss": loss_sum / max(steps, 1)}
        print(json.dumps(record), flush=True)
        epochs.append(record)
    return {"epochs": epochs}


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--endpoint", default=os.environ.get("AIS_ENDPOINT", "http://localhost:8080"))
    p.add_argument("--data", type=Path, default=Path("pets-data"))
    p.add_argument(
        "--samples", type=int, default=200, help="synthetic samples when --data is empty"
    )
    p.add_argument("--bucket", default="pets-seed")
    p.add_argument("--maxcount", type=int, default=25, help="samples per uploaded shard")
    p.add_argument("--shard-size", type=int, default=32768, help="dSort output_shard_size (bytes)")
    p.add_argument("--etl", default="pets-etl")
    p.add_argument("--deploy", action="store_true", help="init_class the pets ETL first")
    p.add_argument(
        "--no-etl",
        action="store_true",
        help="skip the ETL (AIStore runs ETLs only on Kubernetes) and transform in the loader",
    )
    p.add_argument("--size", type=int, default=32)
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--epochs", type=int, default=1)
    opts = p.parse_args(argv)

    from aistore.sdk import Client

    client = Client(opts.endpoint, token=os.environ.get("AIS_AUTHN_TOKEN"))
    registry = wds.OpenerRegistry()
    registry.register("ais", AisOpener(endpoint=opts.endpoint, timeout=(5.0, 120.0)), override=True)
    if not (opts.data / "classes.txt").exists():
        make_dataset(opts.data, opts.samples)
    if opts.deploy:
        sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
        from etl.deploy import deploy_class
        from etl.pets.server import PetsEtl

        deploy_class(client, opts.etl, PetsEtl)
    client.bucket(opts.bucket).create(exist_ok=True)
    shards, written = write_shards(opts.data, opts.bucket, opts.maxcount, registry)
    print(json.dumps({"written": written, "shards": len(shards)}), flush=True)

    urls, result = shuffle_shards(client, opts.bucket, len(shards), opts.shard_size, registry)
    print(
        json.dumps({"dsort": result.job_id, "members": result.members, "shards": len(urls)}),
        flush=True,
    )

    if opts.no_etl:
        reason = (
            "--no-etl: AIStore runs ETLs only on Kubernetes; the loader resizes and maps "
            "the trimaps itself"
        )
        print(json.dumps({"etl": "skipped", "reason": reason}), flush=True)
    report = train(urls, opts, registry)
    last = report["epochs"][-1]
    summary = {
        "written": written,
        "seen": last["samples"],
        "loss": last["loss"],
        "workers": opts.workers,
    }
    print(json.dumps({"summary": summary}), flush=True)
    return 0 if all(e["samples"] == written for e in report["epochs"]) else 1


if __name__ == "__main__":
    sys.exit(main())
