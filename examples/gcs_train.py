"""Train from shards in Google Cloud Storage (or fake-gcs-server).

Run against fake-gcs-server (or GCS itself without --endpoint)::

    GOOGLE_CLOUD_PROJECT=test \\
    python examples/gcs_train.py --endpoint http://127.0.0.1:4443 --bucket mybucket --write

``--write`` first streams 256 synthetic samples as shards to ``gs://BUCKET/PREFIX``;
without it the shards must already be there. The shards are listed with ``list_shards``
and read by ``make_loader`` with 2 workers. ``--endpoint`` sets ``STORAGE_EMULATOR_HOST`` for
this process and its workers; leave it out for GCS itself (credentials from the usual Google environment).
"""

from __future__ import annotations

from cloud_train import run  # the shared loop; the script's own directory is on sys.path

if __name__ == "__main__":
    run(None, scheme="gs", endpoint_env="STORAGE_EMULATOR_HOST", doc=__doc__)
