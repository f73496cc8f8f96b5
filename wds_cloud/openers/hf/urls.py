"""``hf://`` URLs: what they name on the Hugging Face Hub, and the Hub URLs that read them.

The forms (those of ``huggingface_hub``'s ``HfFileSystem``, which webdataset 1.0.2's
``gopen_hf`` resolves its ``hf://`` URLs with):

- ``hf://datasets/{org}/{repo}[@{revision}]/{path}``: a dataset repo;
- ``hf://spaces/{org}/{repo}[@{revision}]/{path}``: a Space;
- ``hf://{org}/{repo}[@{revision}]/{path}``: a model (no type word; ``models/`` is not one:
  ``hf://models/x/y`` is the model ``models/x``, as in ``HfFileSystem``).

``hf://buckets/...`` (Storage Buckets) is refused with a pointer to ``s3://``: buckets are
S3-compatible, and not Git repos (no revision, no ``resolve``).

The revision defaults to ``main``. It may be written percent-encoded
(``@refs%2Fconvert%2Fparquet``); the special refs ``refs/convert/{name}`` and ``refs/pr/{n}``
may also be written with plain slashes (``@refs/convert/parquet/default/train/0.parquet``).
Any other revision with a ``/`` (a branch ``feature/x``) must be encoded (``@feature%2Fx``):
unencoded, its first segment is the revision and the rest the path, as in ``HfFileSystem``.

The Hub URLs (``huggingface_hub``'s ``hf_hub_url`` and ``HfApi.list_repo_tree``):

- read: ``{endpoint}/{datasets/|spaces/|}{org}/{repo}/resolve/{revision}/{path}``, the revision
  quoted with no safe character (``refs%2Fconvert%2Fparquet``), the path quoted with ``/`` kept;
- list: ``{endpoint}/api/{datasets|spaces|models}/{org}/{repo}/tree/{revision}[/{path}]``, the
  revision and the path quoted with no safe character.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import quote, unquote

from wds_cloud.errors import ConfigError
from wds_cloud.redact import redact_url

__all__ = ["DEFAULT_REVISION", "HfPath", "parse_hf_url"]

DEFAULT_REVISION = "main"

#: repo types written as the URL's first word, and their word in the Hub's URLs
_TYPES = {"datasets": "dataset", "spaces": "space"}
_RESOLVE_PREFIX = {"dataset": "datasets/", "space": "spaces/", "model": ""}
_API_WORD = {"dataset": "datasets", "space": "spaces", "model": "models"}

# refs whose name holds "/" and that may be written unencoded after "@"
_SPECIAL_REFS = re.compile(r"^(refs/convert/\w+|refs/pr/\d+)")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")

_SHAPES = (
    "hf://datasets/ORG/REPO[@REVISION]/PATH, hf://spaces/ORG/REPO[@REVISION]/PATH or "
    "hf://ORG/REPO[@REVISION]/PATH (a model)"
)


@dataclass(frozen=True)
class HfPath:
    """One ``hf://`` URL taken apart.

    Attributes:
        repo_type: ``"dataset"``, ``"space"`` or ``"model"``.
        repo_id: ``"org/repo"``.
        revision: the revision, decoded (``"refs/convert/parquet"``); ``main`` when none given.
        path: the path in the repo, as written (``""`` for the repo's root).
        head: the URL up to the path as the user wrote it, ending in ``/``
            (``"hf://datasets/org/repo@v1/"``): listings build their URLs on it, so each
            listed URL starts with the URL that was listed.
    """

    repo_type: str
    repo_id: str
    revision: str
    path: str
    head: str

    def describe(self) -> str:
        """``"dataset org/repo, revision 'main'"``, for messages."""
        return f"{self.repo_type} {self.repo_id}, revision {self.revision!r}"

    def resolve_url(self, endpoint: str) -> str:
        """The Hub URL that reads this file (``/resolve/``)."""
        return (
            f"{endpoint.rstrip('/')}/{_RESOLVE_PREFIX[self.repo_type]}{self.repo_id}/resolve/"
            f"{quote(self.revision, safe='')}/{quote(self.path)}"
        )

    def tree_url(self, endpoint: str, folder: str) -> str:
        """The Hub URL of the tree API for ``folder`` of this repo (``""``: its root)."""
        tail = "/" + quote(folder, safe="") if folder else ""
        return (
            f"{endpoint.rstrip('/')}/api/{_API_WORD[self.repo_type]}/{self.repo_id}/tree/"
            f"{quote(self.revision, safe='')}{tail}"
        )


def _bad(url: str, why: str) -> ConfigError:
    return ConfigError(f"{redact_url(url)!r} is not an hf:// URL: {why}; expected {_SHAPES}")


def parse_hf_url(url: str) -> HfPath:
    """Take ``url`` apart (see the module docstring for the forms).

    Raises:
        ConfigError: not ``hf://``, no ``org/repo``, an empty revision or a ``..`` segment,
            naming the URL and the accepted shapes. ``?`` and ``#`` are characters of the path
            (Hub file names may hold them), as in ``HfFileSystem``.
    """
    scheme, sep, rest = url.partition("://")
    if not sep or scheme.lower() != "hf":
        raise _bad(url, "it does not start with hf://")
    first, _, after = rest.partition("/")
    if first == "buckets":
        raise _bad(
            url,
            "Storage Buckets are not read through hf:// here; read them through s3:// with the "
            "endpoint https://s3.hf.co (docs/hf.md)",
        )
    repo_type = _TYPES.get(first)
    head = f"{url[: len(scheme) + 3]}"
    if repo_type is None:
        repo_type = "model"
    else:
        head += first + "/"
        rest = after
    parts = rest.split("/", 2)
    if len(parts) < 2 or not parts[0] or not parts[1]:
        raise _bad(url, f"no ORG/REPO after {head!r}")
    org, repo = parts[0], parts[1]
    tail = parts[2] if len(parts) > 2 else ""
    revision = DEFAULT_REVISION
    if "@" in org:
        raise _bad(url, f"a revision goes after the repo name, not the org ({org!r})")
    if "@" in repo:
        repo, _, written = f"{repo}/{tail}".partition("@")
        special = _SPECIAL_REFS.match(written)
        if special:
            rev_text = special.group(1)
            tail = written[len(rev_text) :].lstrip("/")
        else:
            rev_text, _, tail = written.partition("/")
        if not rev_text:
            raise _bad(url, "an empty revision after '@'")
        revision = unquote(rev_text)
        head += f"{org}/{repo}@{rev_text}/"
    else:
        head += f"{org}/{repo}/"
    for name in (org, repo):
        if not _NAME.match(name):
            raise _bad(url, f"{name!r} is not a Hub org or repo name")
    if any(seg in (".", "..") for seg in tail.split("/")):
        raise _bad(url, "'.' and '..' segments are not allowed in the path")
    return HfPath(repo_type, f"{org}/{repo}", revision, tail, head)
