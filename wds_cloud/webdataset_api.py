"""webdataset 1.0.2's module layout over wds_cloud: ``from webdataset.filters import batched``.

Code written for webdataset mostly uses the top-level names (``import wds_cloud as wds`` covers
those). Some of it imports from webdataset's modules (``webdataset.autodecode``,
``webdataset.cache``, ``webdataset.filters``, ``webdataset.gopen``, ...). For that code this
module offers each of those modules as a light facade whose names resolve, on first use, to
wds_cloud's implementation:

* ``wds_cloud.webdataset_module("filters").batched`` (``wds.filters``, ``wds.utils``, ... work too,
  as in webdataset);
* :func:`alias_webdataset` makes ``import webdataset`` and ``from webdataset.x import y`` give
  wds_cloud, for running webdataset code unchanged (webdataset's own test suite runs this way:
  ``benchmarks/webdataset_suite.py``). It changes ``sys.modules``, so it is never done on import;
  call it once, before the code imports ``webdataset``.

Names a facade lacks raise :class:`AttributeError` naming the module; docs/pipeline.md lists the
deliberate differences.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import Any

from wds_cloud.errors import ConfigError

__all__ = ["WEBDATASET_MODULES", "alias_webdataset", "webdataset_module"]

_DECODE = "wds_cloud.core.decode"
_CACHE = "wds_cloud.core.filecache"
_GOPEN = "wds_cloud.openers.gopen"
_SECURITY = "wds_cloud.security"
_SHARDS = "wds_cloud.core.shards"
_TENBIN = "wds_cloud.core.tenbin"
_UTILS = "wds_cloud.core.utils"
_ENCODERS = "wds_cloud.writing.encoders"
_V02 = "wds_cloud.core.webdataset02"

# webdataset module -> {name: wds_cloud module holding it, or "" for the top-level export}
WEBDATASET_MODULES: dict[str, dict[str, str]] = {
    "autodecode": {
        **dict.fromkeys(
            [
                "Continue",
                "Decoder",
                "DecodingError",
                "ImageHandler",
                "basichandlers",
                "gzfilter",
                "handle_extension",
                "imagehandler",
            ],
            "",
        ),
        **dict.fromkeys(
            [
                "IMAGE_EXTENSIONS",
                "call_extension_handler",
                "cbor_loads",
                "default_decoder",
                "imagespecs",
                "msgpack_loads",
                "npy_loads",
                "npz_loads",
                "tenbin_loads",
                "torch_audio",
                "torch_loads",
                "torch_video",
                "unpickle_loads",
                "decoders",
                "default_pre_handlers",
                "default_post_handlers",
            ],
            _DECODE,
        ),
    },
    "cache": {
        **dict.fromkeys(["LRUCleanup", "pipe_cleaner"], ""),
        # 0.2.x names (code pinned to webdataset<=0.2.86): see core/webdataset02.py
        **dict.fromkeys(
            [
                "cached_tarfile_samples",
                "cached_tarfile_to_samples",
                "cached_url_opener",
                "get_file_cached",
            ],
            _V02,
        ),
        **dict.fromkeys(
            [
                "FileCache",
                "StreamingOpen",
                "url_to_cache_name",
                "get_filetype",
                "magic_filetype",
                "check_tar_format",
                "islocal",
                "download",
                "default_cache_dir",
                "default_cache_size",
            ],
            _CACHE,
        ),
    },
    "compat": dict.fromkeys(
        [
            "DataPipeline",
            "FluidInterface",
            "FluidWrapper",
            "WebDataset",
            "WebLoader",
            "check_empty",
            "group_by_keys",
            "pipelinefilter",
            "reraise_exception",
            "tar_file_expander",
        ],
        "",
    ),
    "extradatasets": dict.fromkeys(["MockDataset", "repeatedly", "with_epoch", "with_length"], ""),
    "filters": {
        **dict.fromkeys(
            [
                "Cached",
                "LMDBCached",
                "associate",
                "batched",
                "decode",
                "default_collation_fn",
                "detshuffle",
                "extract_keys",
                "getfirst",
                "info",
                "log_keys",
                "map",
                "map_dict",
                "map_tuple",
                "pipelinefilter",
                "rename",
                "rename_keys",
                "reraise_exception",
                "rsample",
                "select",
                "shuffle",
                "slice",
                "to_tuple",
                "unbatched",
                "unlisted",
                "transform_with",
                "xdecode",
            ],
            "",
        ),
        **dict.fromkeys(["FilterFunction", "RestCurried"], "wds_cloud.core.curry"),
        "parse_field_spec": "wds_cloud.core.stages",
        # the generator functions behind the curried stages (imported by copied training code)
        **dict.fromkeys(
            [
                "_extract_keys",
                "_map",
                "_map_dict",
                "_map_tuple",
                "_rename",
                "_rename_keys",
                "_rsample",
                "_select",
                "_to_tuple",
            ],
            "wds_cloud.core.stages",
        ),
        **dict.fromkeys(["_batched", "_unbatched", "_unlisted"], "wds_cloud.core.batching"),
        **dict.fromkeys(["_associate", "_info", "_log_keys"], "wds_cloud.core.extras"),
        # webdataset's draws (_shuffle) and signature (_decode): see core/filters_private.py
        **dict.fromkeys(["_decode", "_shuffle"], "wds_cloud.core.filters_private"),
        "_xdecode": "wds_cloud.core.xdecode",
        **dict.fromkeys(
            ["decode_bin", "decode_pickle", "decode_text", "default_decoders", "find_decoder"],
            "wds_cloud.core.xdecode",
        ),
        **dict.fromkeys(
            [
                "identity",
                "compose",
                "compose2",
                "pick",
                "dict2tuple",
                "tuple2dict",
            ],
            _UTILS,
        ),
    },
    "gopen": dict.fromkeys(["gopen", "gopen_schemes", "rewrite_url", "reader"], _GOPEN),
    "handlers": dict.fromkeys(
        [
            "ignore_and_continue",
            "ignore_and_stop",
            "reraise_exception",
            "warn_and_continue",
            "warn_and_stop",
        ],
        "",
    ),
    "mix": {
        **dict.fromkeys(["RandomMix", "RoundRobin"], ""),
        **dict.fromkeys(
            ["random_samples", "round_robin_longest", "round_robin_shortest"], "wds_cloud.core.mix"
        ),
    },
    "pipeline": dict.fromkeys(["DataPipeline"], ""),
    "pytorch": dict.fromkeys(
        ["DataLoader", "IterableDataset", "TorchTensor"], "wds_cloud.pytorch.torchnames"
    ),
    "shardlists": {
        "expand_source": "wds_cloud.core.shardsource",
        **dict.fromkeys(
            [
                "ResampledShards",
                "SimpleShardList",
                "expand_urls",
                "non_empty",
                "pipelinefilter",
                "single_node_only",
                "split_by_node",
                "split_by_worker",
                "resampled",
                "shardspec",
                "MultiShardSample",
                "DirectoryShardList",
            ],
            "",
        ),
        **dict.fromkeys(["ResampledShardList"], _SHARDS),
        "MSSource": "wds_cloud.core.multishard",
        **dict.fromkeys(
            ["check_pid_is_running", "get_pid_from_filename", "without_last_extension"],
            "wds_cloud.core.dirshards",
        ),
    },
    "tariterators": {
        **dict.fromkeys(
            [
                "base_plus_ext",
                "group_by_keys",
                "tarfile_samples",
                "tarfile_to_samples",
                "url_opener",
            ],
            "",
        ),
        **dict.fromkeys(["meta_prefix", "meta_suffix", "valid_sample"], "wds_cloud.core.samples"),
        "tar_file_iterator": "wds_cloud.core.shardopen",
        # 0.2.86's: no end-of-shard {} (the copied groupers cannot read it; docs/pipeline.md)
        "tar_file_expander": _V02,
    },
    "tenbin": dict.fromkeys(["encode_buffer", "decode_buffer"], _TENBIN),
    "utils": {
        **dict.fromkeys(["repeatedly", "PipelineStage"], ""),
        "guess_batchsize": "wds_cloud.core.extras",
        **dict.fromkeys(
            [
                "identity",
                "is_iterable",
                "make_seed",
                "pytorch_worker_info",
                "pytorch_worker_seed",
            ],
            _UTILS,
        ),
    },
    "writer": {
        **dict.fromkeys(["ShardWriter", "TarWriter", "gopen", "numpy_dumps", "torch_dumps"], ""),
        **dict.fromkeys(
            [
                "default_handlers",
                "make_encoder",
                "cbor_dumps",
                "mp_dumps",
                "tenbin_dumps",
                "imageencoder",
                "make_handlers",
                "add_handlers",
                "bytestr",
                "encode_based_on_extension",
                "numpy_npz_dumps",
            ],
            _ENCODERS,
        ),
    },
}


class _Facade(types.ModuleType):
    """One webdataset module: its names resolve lazily to wds_cloud's implementation."""

    def __init__(self, name: str) -> None:
        super().__init__(f"wds_cloud.webdataset_api.{name}")
        self.__doc__ = f"webdataset.{name} over wds_cloud (see wds_cloud.webdataset_api)."
        self._wds_name = name
        # as in webdataset, ``from webdataset.filters import *`` gives no ``_private`` name
        self.__all__ = sorted(n for n in WEBDATASET_MODULES[name] if not n.startswith("_"))

    def __getattr__(self, attr: str) -> Any:
        names = WEBDATASET_MODULES[self._wds_name]
        if attr not in names:
            raise AttributeError(
                f"webdataset.{self._wds_name}.{attr} is not part of wds_cloud's webdataset API "
                "(docs/pipeline.md lists the differences)"
            )
        # Looked up each time (not stored): values such as webdataset.cache.default_cache_dir
        # follow the environment as wds_cloud's own names do.
        home = names[attr]
        if home:
            return getattr(importlib.import_module(home), attr)
        import wds_cloud

        return getattr(wds_cloud, attr)

    def __dir__(self) -> list[str]:
        return sorted(set(super().__dir__()) | set(WEBDATASET_MODULES[self._wds_name]))


class _UtilsFacade(_Facade):
    """``webdataset.utils``: ``enforce_security`` reads and sets wds_cloud's secure-mode switch."""

    @property
    def enforce_security(self) -> bool:
        from wds_cloud.security import secure_mode

        return secure_mode()

    @enforce_security.setter
    def enforce_security(self, value: bool) -> None:
        import wds_cloud.security as security

        security.enforce_security = bool(value)


class MixModule(_Facade):
    """``wds.mix``: webdataset's module (``wds.mix.RandomMix``) that is also the data-plan
    constructor, ``wds.mix({"a": shards_a, "b": shards_b}, weights=...)``
    (:func:`wds_cloud.core.mixplan.mix`)."""

    def __call__(self, sources: Any, **options: Any) -> Any:
        from wds_cloud.core.mixplan import mix

        return mix(sources, **options)


_FACADES: dict[str, _Facade] = {}


def webdataset_module(name: str) -> types.ModuleType:
    """The facade for webdataset's module ``name`` (``"filters"``, ``"autodecode"``, ...)."""
    if name not in WEBDATASET_MODULES:
        raise AttributeError(f"webdataset has no module {name!r} that wds_cloud provides")
    if name not in _FACADES:
        kind = {"utils": _UtilsFacade, "mix": MixModule}.get(name, _Facade)
        _FACADES[name] = kind(name)
    return _FACADES[name]


def alias_webdataset() -> None:
    """Make ``import webdataset`` (and its modules) give wds_cloud, for unchanged webdataset code.

    Raises :class:`ConfigError` when the real webdataset package is already imported (both cannot
    be ``webdataset`` at once). Calling it twice is harmless.
    """
    import wds_cloud

    current = sys.modules.get("webdataset")
    if current is wds_cloud:
        return
    if current is not None:
        raise ConfigError(
            "alias_webdataset: the webdataset package is already imported; "
            "call alias_webdataset() before anything imports webdataset"
        )
    sys.modules["webdataset"] = wds_cloud
    for name in WEBDATASET_MODULES:
        sys.modules[f"webdataset.{name}"] = webdataset_module(name)
