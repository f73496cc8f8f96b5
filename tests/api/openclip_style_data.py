"""A training-data module written the way open_clip's ``src/training/data.py`` (and the many
modules copied from it) is written, run by ``test_webdataset_copy_pattern.py`` in a subprocess:
once with genuine webdataset, once with ``--alias`` (wds_cloud through ``alias_webdataset()``).

It prints one JSON line per epoch: the batches the ``WebLoader`` delivered, in order.

    python openclip_style_data.py [--alias] --workers N [--resampled] [--sample-shuffle] URL...
"""
# ruff: noqa: E402 (webdataset is imported after the optional alias, as a user would)

from __future__ import annotations

import argparse
import json
import random
import sys
from multiprocessing import Value
from typing import Any

parser = argparse.ArgumentParser()
parser.add_argument("--alias", action="store_true")
parser.add_argument("--workers", type=int, default=1)
parser.add_argument("--resampled", action="store_true")
parser.add_argument("--sample-shuffle", action="store_true")
parser.add_argument("--epochs", type=int, default=3)
parser.add_argument("urls", nargs="+")
args = parser.parse_args()

if args.alias:
    import wds_cloud

    wds_cloud.alias_webdataset()

import webdataset as wds
from webdataset.filters import _shuffle
from webdataset.tariterators import base_plus_ext, tar_file_expander, url_opener, valid_sample

_SHARD_SHUFFLE_SIZE = 5
_SHARD_SHUFFLE_INITIAL = 2
_SAMPLE_SHUFFLE_SIZE = 20
_SAMPLE_SHUFFLE_INITIAL = 5
BATCH_SIZE = 4


class SharedEpoch:
    def __init__(self, epoch: int = 0):
        self.shared_epoch = Value("i", epoch)

    def set_value(self, epoch: int) -> None:
        self.shared_epoch.value = epoch

    def get_value(self) -> int:
        return int(self.shared_epoch.value)


def log_and_continue(exn: Exception) -> bool:
    """Call in an exception handler to ignore any exception, issue a warning, and continue."""
    print(f"Handling webdataset error ({exn!r}). Ignoring.", file=sys.stderr)
    return True


def group_by_keys_nothrow(
    data: Any,
    keys: Any = base_plus_ext,
    lcase: bool = True,
    suffixes: Any = None,
    handler: Any = None,
) -> Any:
    """Return function over iterator that groups key, value pairs into samples."""
    current_sample = None
    for filesample in data:
        assert isinstance(filesample, dict)
        if "fname" not in filesample:  # webdataset 1.0.2's end-of-shard {}
            continue
        fname, value = filesample["fname"], filesample["data"]
        prefix, suffix = keys(fname)
        if prefix is None:
            continue
        if lcase:
            suffix = suffix.lower()
        # a repeated suffix starts a new sample instead of raising, as open_clip does
        if current_sample is None or prefix != current_sample["__key__"] or suffix in current_sample:  # fmt: skip
            if valid_sample(current_sample):
                yield current_sample
            current_sample = dict(__key__=prefix, __url__=filesample["__url__"])
        if suffixes is None or suffix in suffixes:
            current_sample[suffix] = value
    if valid_sample(current_sample):
        yield current_sample


def tarfile_to_samples_nothrow(src: Any, handler: Any = log_and_continue) -> Any:
    streams = url_opener(src, handler=handler)
    files = tar_file_expander(streams, handler=handler)
    samples = group_by_keys_nothrow(files, handler=handler)
    return samples


class detshuffle2(wds.PipelineStage):
    def __init__(self, bufsize: int = 1000, initial: int = 100, seed: int = 0, epoch: Any = -1):
        self.bufsize = bufsize
        self.initial = initial
        self.seed = seed
        self.epoch = epoch

    def run(self, src: Any) -> Any:
        if isinstance(self.epoch, SharedEpoch):
            epoch = self.epoch.get_value()
        else:
            # NOTE: this is epoch tracking is problematic in a multiprocess (dataloader workers or
            # train) situation as different workers may wrap at different times (or not at all).
            self.epoch += 1
            epoch = self.epoch
        rng = random.Random()
        rng.seed(self.seed + epoch)
        return _shuffle(src, self.bufsize, self.initial, rng)


def filter_no_caption(sample: dict[str, Any]) -> bool:
    return "txt" in sample


def get_wds_dataset(urls: list[str], shared_epoch: SharedEpoch, workers: int) -> Any:
    if args.resampled:
        pipeline: list[Any] = [wds.ResampledShards(urls, deterministic=True)]
    else:
        pipeline = [
            wds.SimpleShardList(urls),
            detshuffle2(
                bufsize=_SHARD_SHUFFLE_SIZE,
                initial=_SHARD_SHUFFLE_INITIAL,
                seed=7,
                epoch=shared_epoch,
            ),
            wds.split_by_node,
            wds.split_by_worker,
        ]
    pipeline.append(tarfile_to_samples_nothrow)
    if args.sample_shuffle:
        pipeline.append(wds.shuffle(bufsize=_SAMPLE_SHUFFLE_SIZE, initial=_SAMPLE_SHUFFLE_INITIAL))
    pipeline.extend(
        [
            wds.select(filter_no_caption),
            wds.decode(handler=log_and_continue),
            wds.rename(text="txt", label="cls"),
            wds.to_tuple("__key__", "text", "label"),
            wds.batched(BATCH_SIZE, partial=False),
        ]
    )
    dataset = wds.DataPipeline(*pipeline)
    if args.resampled:
        dataset = dataset.with_epoch(6)  # batches per worker and epoch
    return wds.WebLoader(
        dataset,
        batch_size=None,
        shuffle=False,
        num_workers=workers,
        persistent_workers=workers > 0,
    )


def main() -> None:
    shared_epoch = SharedEpoch(epoch=0)
    loader = get_wds_dataset(args.urls, shared_epoch, args.workers)
    for epoch in range(args.epochs):
        shared_epoch.set_value(epoch)
        batches = [[list(keys), list(texts), [int(x) for x in labels]] for keys, texts, labels in loader]  # fmt: skip
        print(json.dumps(batches), flush=True)


if __name__ == "__main__":
    main()
