"""``hf://`` URLs taken apart and turned into the Hub's URLs, by the rules of
``huggingface_hub`` (``HfFileSystem.resolve_path``, ``hf_hub_url``, ``HfApi.list_repo_tree``)."""

from __future__ import annotations

import pytest

from wds_cloud.errors import ConfigError
from wds_cloud.openers.hf.urls import parse_hf_url

E = "https://hub.example"


@pytest.mark.parametrize(
    ("url", "repo_type", "repo_id", "revision", "path", "head"),
    [
        (
            "hf://datasets/org/ds/train/a.tar",
            "dataset",
            "org/ds",
            "main",
            "train/a.tar",
            "hf://datasets/org/ds/",
        ),
        (
            "hf://org/model/weights/x.bin",
            "model",
            "org/model",
            "main",
            "weights/x.bin",
            "hf://org/model/",
        ),
        (
            "hf://spaces/org/app/data/a.tar",
            "space",
            "org/app",
            "main",
            "data/a.tar",
            "hf://spaces/org/app/",
        ),
        (
            "hf://datasets/org/ds@v1.0/a.tar",
            "dataset",
            "org/ds",
            "v1.0",
            "a.tar",
            "hf://datasets/org/ds@v1.0/",
        ),
        (
            "hf://datasets/org/ds@refs/convert/parquet/default/train/0.parquet",
            "dataset",
            "org/ds",
            "refs/convert/parquet",
            "default/train/0.parquet",
            "hf://datasets/org/ds@refs/convert/parquet/",
        ),
        (
            "hf://datasets/org/ds@refs%2Fconvert%2Fparquet/default/0.parquet",
            "dataset",
            "org/ds",
            "refs/convert/parquet",
            "default/0.parquet",
            "hf://datasets/org/ds@refs%2Fconvert%2Fparquet/",
        ),
        (
            "hf://org/m@refs/pr/12/x.bin",
            "model",
            "org/m",
            "refs/pr/12",
            "x.bin",
            "hf://org/m@refs/pr/12/",
        ),
        (
            "hf://datasets/org/ds@feature%2Fx/a.tar",
            "dataset",
            "org/ds",
            "feature/x",
            "a.tar",
            "hf://datasets/org/ds@feature%2Fx/",
        ),
        # an unencoded branch with "/": its first segment is the revision (HfFileSystem's rule)
        (
            "hf://datasets/org/ds@feature/x/a.tar",
            "dataset",
            "org/ds",
            "feature",
            "x/a.tar",
            "hf://datasets/org/ds@feature/",
        ),
        ("hf://datasets/org/ds", "dataset", "org/ds", "main", "", "hf://datasets/org/ds/"),
        ("hf://datasets/org/ds@v2", "dataset", "org/ds", "v2", "", "hf://datasets/org/ds@v2/"),
        ("hf://models/org/x.bin", "model", "models/org", "main", "x.bin", "hf://models/org/"),
    ],
)
def test_parse(url: str, repo_type: str, repo_id: str, revision: str, path: str, head: str) -> None:
    where = parse_hf_url(url)
    assert (where.repo_type, where.repo_id, where.revision, where.path, where.head) == (
        repo_type,
        repo_id,
        revision,
        path,
        head,
    )
    assert url.startswith(where.head.rstrip("/"))


@pytest.mark.parametrize(
    ("url", "resolve", "tree"),
    [
        (
            "hf://datasets/org/ds/train/a b#1?.tar",
            f"{E}/datasets/org/ds/resolve/main/train/a%20b%231%3F.tar",
            f"{E}/api/datasets/org/ds/tree/main/train",
        ),
        (
            "hf://org/m@refs/convert/parquet/d/x.parquet",
            f"{E}/org/m/resolve/refs%2Fconvert%2Fparquet/d/x.parquet",
            f"{E}/api/models/org/m/tree/refs%2Fconvert%2Fparquet/d",
        ),
        (
            "hf://spaces/org/app@v1/a/b/c.tar",
            f"{E}/spaces/org/app/resolve/v1/a/b/c.tar",
            f"{E}/api/spaces/org/app/tree/v1/a%2Fb",
        ),
    ],
)
def test_hub_urls(url: str, resolve: str, tree: str) -> None:
    where = parse_hf_url(url)
    assert where.resolve_url(E + "/") == resolve
    assert where.tree_url(E, where.path.rpartition("/")[0]) == tree
    root = parse_hf_url("hf://datasets/org/ds@refs/pr/3/x.tar").tree_url(E, "")
    assert root == f"{E}/api/datasets/org/ds/tree/refs%2Fpr%2F3"


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("s3://b/k.tar", "does not start with hf://"),
        ("hf://datasets/org", "no ORG/REPO"),
        ("hf://datasets/", "no ORG/REPO"),
        ("hf://single", "no ORG/REPO"),
        ("hf://org@v1/repo/a.tar", "goes after the repo name"),
        ("hf://datasets/org/ds@/a.tar", "empty revision"),
        ("hf://datasets/org/ds/../other/a.tar", "'..' segments"),
        ("hf://datasets/o rg/ds/a.tar", "not a Hub org or repo name"),
        ("hf://buckets/org/b/a.tar", "through s3:// with the endpoint https://s3.hf.co"),
    ],
)
def test_bad_shapes_say_what_is_expected(url: str, why: str) -> None:
    with pytest.raises(ConfigError, match=why) as err:
        parse_hf_url(url)
    assert "hf://datasets/ORG/REPO[@REVISION]/PATH" in str(err.value)
