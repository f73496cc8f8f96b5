"""The :class:`DsortSpec` builder and JSON/YAML spec files."""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from wds_cloud.aistore.dsort.validate import suffix_ext, validate
from wds_cloud.errors import DsortSpecError


def load_spec(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Reads a ``.json``/``.yaml``/``.yml`` spec file and validates it.

    Raises:
        DsortSpecError: unsupported suffix, unreadable document, or an invalid spec.
    """
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in (".json", ".yaml", ".yml"):
        raise DsortSpecError(f"{path}: a spec file must end in .json, .yaml or .yml")
    try:
        text = path.read_text(encoding="utf-8")
        data = json.loads(text) if suffix == ".json" else yaml.safe_load(text)
    except (OSError, ValueError, yaml.YAMLError) as exc:
        raise DsortSpecError(f"{path}: cannot read the spec: {exc}") from exc
    try:
        return validate(data)
    except DsortSpecError as exc:
        raise DsortSpecError(f"{path}: {exc.reason}", field=exc.field) from exc


@dataclass
class DsortSpec:
    """Builds a dSort spec with AIStore's key names; :meth:`to_dict` validates it.

    Example::

        spec = DsortSpec(input_bck="data", input_template="samples-{00..18}.tar",
                         output_bck="shuffled", output_format="shuffled-shard-%d.tar",
                         output_shard_size="100MiB", algorithm="shuffle", seed="42")
        spec.write("shuffle.yaml")

    Attributes mirror the spec keys; ``input_template``/``input_objnames`` become
    ``input_format``, ``algorithm``/``decreasing``/``seed``/``content_extension``/
    ``content_key_type`` become the ``algorithm`` object, ``config`` becomes ``Config``.
    ``seed`` and ``output_shard_size`` may be given as ints; they are emitted as strings.
    """

    input_bck: str
    output_format: str = ""
    input_template: str | None = None
    input_objnames: list[str] | None = None
    input_extension: str = ".tar"
    input_provider: str = "ais"
    output_bck: str | None = None
    output_provider: str = "ais"
    output_extension: str | None = None
    output_shard_size: str | int | None = None
    algorithm: str = "alphanumeric"
    decreasing: bool = False
    seed: str | int | None = None
    content_extension: str | None = None
    content_key_type: str | None = None
    description: str = ""
    max_mem_usage: str | None = None
    dry_run: bool = False
    extract_concurrency_max_limit: int | None = None
    create_concurrency_max_limit: int | None = None
    ekm_file: str | None = None
    ekm_file_sep: str | None = None
    config: dict[str, str] | None = None

    def to_dict(self) -> dict[str, Any]:
        """Returns the validated spec dict (keys in the SDK's ``to_spec`` order).

        Raises:
            DsortSpecError: the spec is invalid.
        """
        if (self.input_template is None) == (self.input_objnames is None):
            raise DsortSpecError(
                "give exactly one of input_template or input_objnames", field="input_format"
            )
        fmt: dict[str, Any] = (
            {"template": self.input_template}
            if self.input_template is not None
            else {"objnames": list(self.input_objnames or [])}
        )
        alg: dict[str, Any] = {"kind": self.algorithm, "decreasing": self.decreasing}
        alg["seed"] = "" if self.seed is None else str(self.seed)
        if self.content_extension is not None or self.content_key_type is not None:
            alg["extension"] = self.content_extension or ""
            alg["content_key_type"] = self.content_key_type or ""
        spec: dict[str, Any] = {
            "input_bck": {"name": self.input_bck, "provider": self.input_provider},
            "input_format": fmt,
            "input_extension": self.input_extension,
            "output_bck": {
                "name": self.output_bck or self.input_bck,
                "provider": self.output_provider,
            },
            "output_format": self.output_format,
            "output_extension": self.output_extension or self.input_extension,
            "algorithm": alg,
            "description": self.description,
        }
        if self.output_shard_size is not None:
            spec["output_shard_size"] = str(self.output_shard_size)
        optional = {
            "max_mem_usage": self.max_mem_usage,
            "extract_concurrency_max_limit": self.extract_concurrency_max_limit,
            "create_concurrency_max_limit": self.create_concurrency_max_limit,
            "dry_run": self.dry_run or None,
            "ekm_file": self.ekm_file,
            "ekm_file_sep": self.ekm_file_sep,
            "Config": self.config,
        }
        spec.update({k: v for k, v in optional.items() if v is not None})
        return validate(spec)

    @classmethod
    def from_dict(cls, spec: Mapping[str, Any]) -> DsortSpec:
        """Builds a :class:`DsortSpec` from a spec dict (validated first).

        Raises:
            DsortSpecError: the spec is invalid.
        """
        spec = validate(spec)
        alg, fmt = spec.get("algorithm", {}), spec["input_format"]
        out_bck = spec.get("output_bck") or spec["input_bck"]
        return cls(
            input_bck=spec["input_bck"]["name"],
            input_provider=spec["input_bck"].get("provider") or "ais",
            input_template=fmt.get("template"),
            input_objnames=fmt.get("objnames"),
            input_extension=spec.get("input_extension")
            or suffix_ext(fmt.get("template", ""))
            or ".tar",
            output_bck=out_bck["name"],
            output_provider=out_bck.get("provider") or "ais",
            output_format=spec.get("output_format", ""),
            output_extension=spec.get("output_extension"),
            output_shard_size=spec.get("output_shard_size"),
            algorithm=alg.get("kind", "") or "alphanumeric",
            decreasing=alg.get("decreasing", False),
            seed=alg.get("seed") or None,
            content_extension=alg.get("extension"),
            content_key_type=alg.get("content_key_type"),
            description=spec.get("description", ""),
            max_mem_usage=spec.get("max_mem_usage"),
            dry_run=spec.get("dry_run", False),
            extract_concurrency_max_limit=spec.get("extract_concurrency_max_limit"),
            create_concurrency_max_limit=spec.get("create_concurrency_max_limit"),
            ekm_file=spec.get("ekm_file"),
            ekm_file_sep=spec.get("ekm_file_sep"),
            config=spec.get("Config"),
        )

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> DsortSpec:
        """Reads a JSON/YAML spec file (see :func:`load_spec`)."""
        return cls.from_dict(load_spec(path))

    def to_json(self, indent: int | None = 2) -> str:
        """Returns the validated spec as JSON."""
        return json.dumps(self.to_dict(), indent=indent) + "\n"

    def to_yaml(self) -> str:
        """Returns the validated spec as YAML; strings such as the seed ``"42"`` stay quoted."""
        return yaml.safe_dump(self.to_dict(), sort_keys=False, default_flow_style=False)

    def write(self, path: str | os.PathLike[str]) -> Path:
        """Writes the spec as JSON or YAML, chosen by the suffix (``.json``, ``.yaml``, ``.yml``).

        Raises:
            DsortSpecError: unsupported suffix or invalid spec.
        """
        path = Path(path)
        suffix = path.suffix.lower()
        if suffix not in (".json", ".yaml", ".yml"):
            raise DsortSpecError(f"{path}: a spec file must end in .json, .yaml or .yml")
        path.write_text(self.to_json() if suffix == ".json" else self.to_yaml(), encoding="utf-8")
        return path

    def replace(self, **changes: Any) -> DsortSpec:
        """Returns a copy with some fields changed."""
        return dataclasses.replace(self, **changes)
