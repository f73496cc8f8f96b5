"""wds_cloud: stream WebDataset tar shards from local disk, pipes, HTTP, S3, GCS, AIStore and
SageMaker into PyTorch.

``import wds_cloud as wds`` gives the webdataset 1.0.2 API (``wds.WebDataset``,
``wds.DataPipeline``, ``wds.WebLoader``, the stage functions, decoders and handlers) plus the
cloud pieces (``list_shards``, ``ShardWriter`` to ``s3://``/``gs://``/``ais://``,
``upload_shards``, the opener registry, dSort, SageMaker channels, ``make_loader``).

Names are imported on first use, so ``import wds_cloud`` stays light: it imports neither torch
nor numpy nor any cloud SDK. ``WebDataset``, ``DataPipeline`` and ``FluidWrapper`` are torch
``IterableDataset`` subclasses when torch is installed (from :mod:`wds_cloud.pytorch`) and plain
iterables otherwise (from :mod:`wds_cloud.core`).
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:  # what type checkers see; test_typing keeps it equal to the tables below
    from types import ModuleType

    from wds_cloud.aistore.dsort import (
        DsortJobError as DsortJobError,
        DsortResult as DsortResult,
        DsortSpec as DsortSpec,
        DsortTimeoutError as DsortTimeoutError,
    )
    from wds_cloud.core.avdecode import (
        torch_audio as torch_audio,
        torch_video as torch_video,
    )
    from wds_cloud.core.batching import (
        batched as batched,
        listed as listed,
        unbatched as unbatched,
        unlisted as unlisted,
    )
    from wds_cloud.core.cbors import (
        cbors_to_samples as cbors_to_samples,
        msgpacks_to_samples as msgpacks_to_samples,
    )
    from wds_cloud.core.collate import (
        default_collation_fn as default_collation_fn,
        torch_collate as torch_collate,
    )
    from wds_cloud.core.curry import (
        pipelinefilter as pipelinefilter,
    )
    from wds_cloud.core.decode import (
        Continue as Continue,
        Decoder as Decoder,
        DecodingError as DecodingError,
        basichandlers as basichandlers,
        decode as decode,
        gzfilter as gzfilter,
        handle_extension as handle_extension,
    )
    from wds_cloud.core.dirshards import (
        DirectoryShardList as DirectoryShardList,
    )
    from wds_cloud.core.filecache import (
        pipe_cleaner as pipe_cleaner,
    )
    from wds_cloud.core.fluid import (
        Cached as Cached,
        FluidInterface as FluidInterface,
    )
    from wds_cloud.core.handlers import (
        ContinueHandler as ContinueHandler,
        StopHandler as StopHandler,
        ignore_and_continue as ignore_and_continue,
        ignore_and_stop as ignore_and_stop,
        reraise_exception as reraise_exception,
        warn_and_continue as warn_and_continue,
        warn_and_stop as warn_and_stop,
    )
    from wds_cloud.core.imagedecode import (
        ImageHandler as ImageHandler,
        imagehandler as imagehandler,
    )
    from wds_cloud.core.join import (
        JoinedShards as JoinedShards,
        join as join,
        join_to_samples as join_to_samples,
    )
    from wds_cloud.core.lmdbcache import (
        LMDBCached as LMDBCached,
    )
    from wds_cloud.core.loads import (
        torch_loads as torch_loads,
    )
    from wds_cloud.core.mix import (
        RandomMix as RandomMix,
        RoundRobin as RoundRobin,
    )
    from wds_cloud.core.multishard import (
        MultiShardSample as MultiShardSample,
    )
    from wds_cloud.core.packing import (
        GroupBy as GroupBy,
        Pack as Pack,
        group_by as group_by,
        pack as pack,
    )
    from wds_cloud.core.samples import (
        base_plus_ext as base_plus_ext,
        group_by_keys as group_by_keys,
        tar_samples as tar_samples,
    )
    from wds_cloud.core.shardopen import (
        tar_file_expander as tar_file_expander,
        tarfile_samples as tarfile_samples,
        tarfile_to_samples as tarfile_to_samples,
        url_opener as url_opener,
    )
    from wds_cloud.core.shards import (
        ResampledShards as ResampledShards,
        SimpleShardList as SimpleShardList,
        resampled as resampled,
        shardspec as shardspec,
        shuffle_shards as shuffle_shards,
        single_node_only as single_node_only,
        split_by_node as split_by_node,
        split_by_sample as split_by_sample,
        split_by_worker as split_by_worker,
    )
    from wds_cloud.core.shuffle import (
        detshuffle as detshuffle,
        shuffle as shuffle,
    )
    from wds_cloud.core.stagekind import (
        stage_kind as stage_kind,
    )
    from wds_cloud.core.stages import (
        associate as associate,
        check_empty as check_empty,
        extract_keys as extract_keys,
        getfirst as getfirst,
        info as info,
        log_keys as log_keys,
        map as map,
        map_dict as map_dict,
        map_tuple as map_tuple,
        non_empty as non_empty,
        rename as rename,
        rename_keys as rename_keys,
        repeatedly as repeatedly,
        rsample as rsample,
        select as select,
        slice as slice,
        to_tuple as to_tuple,
    )
    from wds_cloud.core.tar import (
        iter_tar as iter_tar,
    )
    from wds_cloud.core.utils import (
        PipelineStage as PipelineStage,
        transform_with as transform_with,
    )
    from wds_cloud.core.xdecode import (
        xdecode as xdecode,
    )
    from wds_cloud.errors import (
        ConfigError as ConfigError,
        DsortSpecError as DsortSpecError,
        MissingDependencyError as MissingDependencyError,
        SampleError as SampleError,
        SampleKeyError as SampleKeyError,
        ShardError as ShardError,
        ShardNotFoundError as ShardNotFoundError,
        ShardOpenError as ShardOpenError,
        ShardReadError as ShardReadError,
        UnsupportedSchemeError as UnsupportedSchemeError,
        UploadError as UploadError,
        WdsCloudError as WdsCloudError,
    )
    from wds_cloud.index.build import (
        build_index as build_index,
    )
    from wds_cloud.index.check import (
        check_index as check_index,
    )
    from wds_cloud.index.datasetjson import (
        DatasetIndex as DatasetIndex,
        load_dataset_json as load_dataset_json,
    )
    from wds_cloud.index.format import (
        ShardIndex as ShardIndex,
    )
    from wds_cloud.index.globalorder import (
        GlobalBatchSampler as GlobalBatchSampler,
        GlobalOrder as GlobalOrder,
    )
    from wds_cloud.listing import (
        list_shards as list_shards,
    )
    from wds_cloud.openers.ais.opener import (
        AisConfig as AisConfig,
        AisOpener as AisOpener,
    )
    from wds_cloud.openers.azure.opener import (
        AzureConfig as AzureConfig,
        AzureOpener as AzureOpener,
    )
    from wds_cloud.openers.cache.lru import (
        LRUCleanup as LRUCleanup,
    )
    from wds_cloud.openers.cache.shardcache import (
        ShardCache as ShardCache,
    )
    from wds_cloud.openers.gcs.opener import (
        GcsConfig as GcsConfig,
        GcsOpener as GcsOpener,
    )
    from wds_cloud.openers.gopen import (
        gopen as gopen,
        gopen_schemes as gopen_schemes,
    )
    from wds_cloud.openers.hf.opener import (
        HfConfig as HfConfig,
        HfOpener as HfOpener,
    )
    from wds_cloud.openers.http.opener import (
        HttpConfig as HttpConfig,
        HttpOpener as HttpOpener,
    )
    from wds_cloud.openers.local import (
        LocalOpener as LocalOpener,
    )
    from wds_cloud.openers.pipe import (
        PipeOpener as PipeOpener,
    )
    from wds_cloud.openers.registry import (
        OpenerRegistry as OpenerRegistry,
        default_registry as default_registry,
        open_url as open_url,
        read_range as read_range,
        register_opener as register_opener,
    )
    from wds_cloud.openers.s3.opener import (
        S3Config as S3Config,
        S3Opener as S3Opener,
    )
    from wds_cloud.pytorch import (
        DataPipeline as DataPipeline,
        FluidWrapper as FluidWrapper,
        IndexedWebDataset as IndexedWebDataset,
        MockDataset as MockDataset,
        WebDataset as WebDataset,
        WebLoader as WebLoader,
        with_epoch as with_epoch,
        with_length as with_length,
    )
    from wds_cloud.pytorch.builder import (
        DevicePrefetcher as DevicePrefetcher,
        make_loader as make_loader,
    )
    from wds_cloud.pytorch.threadloader import ThreadLoader as ThreadLoader
    from wds_cloud.sagemaker import (
        SageMakerEnv as SageMakerEnv,
        channel_shards as channel_shards,
        sagemaker_dataset as sagemaker_dataset,
    )
    from wds_cloud.tools.bench import (
        BenchResult as BenchResult,
        bench_loader as bench_loader,
        bench_urls as bench_urls,
    )
    from wds_cloud.tools.preview import (
        contact_sheet as contact_sheet,
    )
    from wds_cloud.urls import (
        expand_urls as expand_urls,
    )
    from wds_cloud.webdataset_api import (
        alias_webdataset as alias_webdataset,
        webdataset_module as webdataset_module,
    )
    from wds_cloud.writing.encoders import (
        numpy_dumps as numpy_dumps,
        torch_dumps as torch_dumps,
    )
    from wds_cloud.writing.shardwriter import (
        ShardWriter as ShardWriter,
    )
    from wds_cloud.writing.tarwriter import (
        TarWriter as TarWriter,
    )
    from wds_cloud.writing.upload import (
        upload_shards as upload_shards,
    )

    # webdataset's module names, built on first use by wds_cloud.webdataset_api
    autodecode: ModuleType
    cache: ModuleType
    compat: ModuleType
    extradatasets: ModuleType
    filters: ModuleType
    handlers: ModuleType
    mix: ModuleType
    pipeline: ModuleType
    shardlists: ModuleType
    tariterators: ModuleType
    tenbin: ModuleType
    utils: ModuleType
    writer: ModuleType

# public name -> module that defines it
_EXPORTS: dict[str, str] = {
    # errors
    "ConfigError": "wds_cloud.errors",
    "DsortSpecError": "wds_cloud.errors",
    "MissingDependencyError": "wds_cloud.errors",
    "SampleError": "wds_cloud.errors",
    "SampleKeyError": "wds_cloud.errors",
    "ShardError": "wds_cloud.errors",
    "ShardNotFoundError": "wds_cloud.errors",
    "ShardOpenError": "wds_cloud.errors",
    "ShardReadError": "wds_cloud.errors",
    "UnsupportedSchemeError": "wds_cloud.errors",
    "UploadError": "wds_cloud.errors",
    "WdsCloudError": "wds_cloud.errors",
    # urls, listing, openers
    "expand_urls": "wds_cloud.urls",
    "list_shards": "wds_cloud.listing",
    "OpenerRegistry": "wds_cloud.openers.registry",
    "default_registry": "wds_cloud.openers.registry",
    "open_url": "wds_cloud.openers.registry",
    "read_range": "wds_cloud.openers.registry",
    "register_opener": "wds_cloud.openers.registry",
    "ShardCache": "wds_cloud.openers.cache.shardcache",
    "AisConfig": "wds_cloud.openers.ais.opener",
    "AisOpener": "wds_cloud.openers.ais.opener",
    "AzureConfig": "wds_cloud.openers.azure.opener",
    "AzureOpener": "wds_cloud.openers.azure.opener",
    "GcsConfig": "wds_cloud.openers.gcs.opener",
    "GcsOpener": "wds_cloud.openers.gcs.opener",
    "HfConfig": "wds_cloud.openers.hf.opener",
    "HfOpener": "wds_cloud.openers.hf.opener",
    "HttpConfig": "wds_cloud.openers.http.opener",
    "HttpOpener": "wds_cloud.openers.http.opener",
    "LocalOpener": "wds_cloud.openers.local",
    "PipeOpener": "wds_cloud.openers.pipe",
    "S3Config": "wds_cloud.openers.s3.opener",
    "S3Opener": "wds_cloud.openers.s3.opener",
    # tar + samples
    "iter_tar": "wds_cloud.core.tar",
    "base_plus_ext": "wds_cloud.core.samples",
    "group_by_keys": "wds_cloud.core.samples",
    "tar_file_expander": "wds_cloud.core.shardopen",
    "tar_samples": "wds_cloud.core.samples",
    "tarfile_samples": "wds_cloud.core.shardopen",
    "tarfile_to_samples": "wds_cloud.core.shardopen",
    "url_opener": "wds_cloud.core.shardopen",
    # handlers
    "ContinueHandler": "wds_cloud.core.handlers",
    "StopHandler": "wds_cloud.core.handlers",
    "ignore_and_continue": "wds_cloud.core.handlers",
    "ignore_and_stop": "wds_cloud.core.handlers",
    "reraise_exception": "wds_cloud.core.handlers",
    "warn_and_continue": "wds_cloud.core.handlers",
    "warn_and_stop": "wds_cloud.core.handlers",
    # pipeline
    "FluidInterface": "wds_cloud.core.fluid",
    "pipelinefilter": "wds_cloud.core.curry",
    "RandomMix": "wds_cloud.core.mix",
    "RoundRobin": "wds_cloud.core.mix",
    # joined sources (column sets read in lockstep)
    "JoinedShards": "wds_cloud.core.join",
    "join": "wds_cloud.core.join",
    "join_to_samples": "wds_cloud.core.join",
    # shard lists and splitting
    "ResampledShards": "wds_cloud.core.shards",
    "SimpleShardList": "wds_cloud.core.shards",
    "shuffle_shards": "wds_cloud.core.shards",
    "single_node_only": "wds_cloud.core.shards",
    "split_by_node": "wds_cloud.core.shards",
    "split_by_sample": "wds_cloud.core.shards",
    "split_by_worker": "wds_cloud.core.shards",
    # stages
    "associate": "wds_cloud.core.stages",
    "check_empty": "wds_cloud.core.stages",
    "extract_keys": "wds_cloud.core.stages",
    "info": "wds_cloud.core.stages",
    "log_keys": "wds_cloud.core.stages",
    "map": "wds_cloud.core.stages",
    "map_dict": "wds_cloud.core.stages",
    "map_tuple": "wds_cloud.core.stages",
    "non_empty": "wds_cloud.core.stages",
    "rename": "wds_cloud.core.stages",
    "rename_keys": "wds_cloud.core.stages",
    "repeatedly": "wds_cloud.core.stages",
    "rsample": "wds_cloud.core.stages",
    "select": "wds_cloud.core.stages",
    "slice": "wds_cloud.core.stages",
    "to_tuple": "wds_cloud.core.stages",
    "batched": "wds_cloud.core.batching",
    "listed": "wds_cloud.core.batching",
    "unbatched": "wds_cloud.core.batching",
    "unlisted": "wds_cloud.core.batching",
    "GroupBy": "wds_cloud.core.packing",
    "Pack": "wds_cloud.core.packing",
    "group_by": "wds_cloud.core.packing",
    "pack": "wds_cloud.core.packing",
    "detshuffle": "wds_cloud.core.shuffle",
    "shuffle": "wds_cloud.core.shuffle",
    "stage_kind": "wds_cloud.core.stagekind",
    # decoding and collation
    "Continue": "wds_cloud.core.decode",
    "Decoder": "wds_cloud.core.decode",
    "DecodingError": "wds_cloud.core.decode",
    "basichandlers": "wds_cloud.core.decode",
    "decode": "wds_cloud.core.decode",
    "gzfilter": "wds_cloud.core.decode",
    "handle_extension": "wds_cloud.core.decode",
    "ImageHandler": "wds_cloud.core.imagedecode",
    "imagehandler": "wds_cloud.core.imagedecode",
    "cbors_to_samples": "wds_cloud.core.cbors",
    "msgpacks_to_samples": "wds_cloud.core.cbors",
    "default_collation_fn": "wds_cloud.core.collate",
    "torch_collate": "wds_cloud.core.collate",
    # dSort
    "DsortJobError": "wds_cloud.aistore.dsort",
    "DsortResult": "wds_cloud.aistore.dsort",
    "DsortSpec": "wds_cloud.aistore.dsort",
    "DsortTimeoutError": "wds_cloud.aistore.dsort",
    # SageMaker
    "SageMakerEnv": "wds_cloud.sagemaker",
    "channel_shards": "wds_cloud.sagemaker",
    "sagemaker_dataset": "wds_cloud.sagemaker",
    # writing
    "ShardWriter": "wds_cloud.writing.shardwriter",
    "TarWriter": "wds_cloud.writing.tarwriter",
    "upload_shards": "wds_cloud.writing.upload",
    # indexes and random access
    "DatasetIndex": "wds_cloud.index.datasetjson",
    "GlobalBatchSampler": "wds_cloud.index.globalorder",
    "GlobalOrder": "wds_cloud.index.globalorder",
    "ShardIndex": "wds_cloud.index.format",
    "build_index": "wds_cloud.index.build",
    "check_index": "wds_cloud.index.check",
    "load_dataset_json": "wds_cloud.index.datasetjson",
    # torch
    "DevicePrefetcher": "wds_cloud.pytorch.builder",
    "ThreadLoader": "wds_cloud.pytorch.threadloader",
    "WebLoader": "wds_cloud.pytorch",
    "make_loader": "wds_cloud.pytorch.builder",
    # webdataset's helpers and stages (webdataset.utils, webdataset.filters)
    "Cached": "wds_cloud.core.fluid",
    "LMDBCached": "wds_cloud.core.lmdbcache",
    "PipelineStage": "wds_cloud.core.utils",
    "getfirst": "wds_cloud.core.stages",
    "transform_with": "wds_cloud.core.utils",
    "xdecode": "wds_cloud.core.xdecode",
    # webdataset's module layout
    "alias_webdataset": "wds_cloud.webdataset_api",
    "webdataset_module": "wds_cloud.webdataset_api",
    # measurement and preview
    "BenchResult": "wds_cloud.tools.bench",
    "bench_loader": "wds_cloud.tools.bench",
    "bench_urls": "wds_cloud.tools.bench",
    "contact_sheet": "wds_cloud.tools.preview",
    # webdataset's cache and shard-list names (webdataset.cache, webdataset.shardlists)
    "LRUCleanup": "wds_cloud.openers.cache.lru",
    "pipe_cleaner": "wds_cloud.core.filecache",
    "DirectoryShardList": "wds_cloud.core.dirshards",
    "MultiShardSample": "wds_cloud.core.multishard",
    "resampled": "wds_cloud.core.shards",
    "shardspec": "wds_cloud.core.shards",
    # webdataset's top-level decoders, encoders and gopen
    "gopen": "wds_cloud.openers.gopen",
    "gopen_schemes": "wds_cloud.openers.gopen",
    "numpy_dumps": "wds_cloud.writing.encoders",
    "torch_audio": "wds_cloud.core.avdecode",
    "torch_dumps": "wds_cloud.writing.encoders",
    "torch_loads": "wds_cloud.core.loads",
    "torch_video": "wds_cloud.core.avdecode",
}

# Classes that are torch IterableDatasets when torch is installed.
_TORCH_AWARE: dict[str, str] = {
    "DataPipeline": "wds_cloud.core.pipeline",
    "FluidWrapper": "wds_cloud.core.compat",
    "IndexedWebDataset": "wds_cloud.index.indexed",
    "WebDataset": "wds_cloud.core.compat",
    "MockDataset": "wds_cloud.core.datasets",
    "with_epoch": "wds_cloud.core.datasets",
    "with_length": "wds_cloud.core.datasets",
}

# webdataset's module names (``wds.filters``, ``wds.utils``, ...): facades, wds_cloud.webdataset_api
_WEBDATASET_MODULES = frozenset(
    [
        "autodecode",
        "cache",
        "compat",
        "extradatasets",
        "filters",
        "handlers",
        "mix",
        "pipeline",
        "shardlists",
        "tariterators",
        "tenbin",
        "utils",
        "writer",
    ]
)

__all__ = sorted([*_EXPORTS, *_TORCH_AWARE, "__version__"])


def _torch_available() -> bool:
    return importlib.util.find_spec("torch") is not None


if not TYPE_CHECKING:  # type checkers see the imports above, so a misspelt name fails

    def __getattr__(name: str) -> Any:
        module = _EXPORTS.get(name)
        if module is None and name in _TORCH_AWARE:
            module = "wds_cloud.pytorch" if _torch_available() else _TORCH_AWARE[name]
        if module is None and name in _WEBDATASET_MODULES:
            from wds_cloud.webdataset_api import webdataset_module

            return webdataset_module(name)  # wds.utils, wds.filters, ... as in webdataset
        if name == "pytorch":  # the torch layer; it holds webdataset.pytorch's names too
            return importlib.import_module("wds_cloud.pytorch")
        if module is None:
            raise AttributeError(f"module 'wds_cloud' has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        globals()[name] = value  # resolve once
        return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
