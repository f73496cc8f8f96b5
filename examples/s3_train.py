"""Train from shards in S3 (or any S3-compatible server such as SeaweedFS or MinIO).

Run against a local S3-compatible server::

    AWS_ACCESS_KEY_ID=... AWS_SECRET_ACCESS_KEY=... \\
    python examples/s3_train.py --endpoint http://127.0.0.1:8333 --bucket mybucket --write

``--write`` first streams 256 synthetic samples as shards to ``s3://BUCKET/PREFIX``;
without it the shards must already be there. The shards are listed with ``list_shards``
and read by ``make_loader`` with 2 workers. ``--endpoint`` sets ``AWS_ENDPOINT_URL`` for
this process and its workers; leave it out for AWS itself.
"""

from __future__ import annotations

from cloud_train import run  # the shared loop; the script's own directory is on sys.path

if __name__ == "__main__":
    run(None, scheme="s3", endpoint_env="AWS_ENDPOINT_URL", doc=__doc__)
