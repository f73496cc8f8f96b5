"""Convert an image-folder dataset (``root/<class>/<image>``) into WebDataset shards.

Run::

    python examples/convert_dataset.py ROOT OUTPUT [--maxcount 1000] [--classes classes.txt]

Each image becomes a sample ``{"__key__": "<class>/<stem>", "<ext>": bytes, "cls": index,
"json": {"class": name, "file": relative path}}``. Class indices follow ``--classes`` (one
name a line) or the sorted folder names. ``OUTPUT`` is a local directory or an
``s3://``/``gs://``/``ais://`` prefix (shards are streamed there by ``ShardWriter``).
"""

from __future__ import annotations

import argparse
import os

import wds_cloud as wds

IMAGE_EXTS = {".jpg", ".jpeg", ".png", ".webp", ".bmp", ".gif", ".tif", ".tiff", ".ppm"}


def convert(
    root: str, output: str, maxcount: int = 1000, classes: list[str] | None = None
) -> list[str]:
    """Write the shards; return their URLs."""
    names = classes or sorted(d for d in os.listdir(root) if os.path.isdir(os.path.join(root, d)))
    if not names:
        raise SystemExit(f"{root}: no class folders")
    if "://" not in output:
        os.makedirs(output, exist_ok=True)
    pattern = output.rstrip("/") + "/shard-%06d.tar"
    with wds.ShardWriter(pattern, maxcount=maxcount) as sink:
        for index, name in enumerate(names):
            folder = os.path.join(root, name)
            for file in sorted(os.listdir(folder)):
                stem, ext = os.path.splitext(file)
                if ext.lower() not in IMAGE_EXTS:
                    continue
                with open(os.path.join(folder, file), "rb") as f:
                    data = f.read()
                sink.write(
                    {
                        "__key__": f"{name}/{stem.replace('.', '_')}",
                        ext[1:].lower(): data,
                        "cls": index,
                        "json": {"class": name, "file": f"{name}/{file}"},
                    }
                )
    return list(sink.shards)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("root")
    parser.add_argument("output")
    parser.add_argument("--maxcount", type=int, default=1000)
    parser.add_argument("--classes", help="file with one class name a line (defines indices)")
    args = parser.parse_args()
    classes = None
    if args.classes:
        with open(args.classes, encoding="utf-8") as f:
            classes = [line.strip() for line in f if line.strip()]
    shards = convert(args.root, args.output, args.maxcount, classes)
    print(f"wrote {len(shards)} shards")
    for url in shards:
        print(url)


if __name__ == "__main__":
    main()
