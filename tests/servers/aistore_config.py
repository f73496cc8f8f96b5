"""The JSON configuration of a small AIStore 5.0 cluster and of its AuthN server.

Written from AIStore's ``docs/configuration.md`` and ``cmn/config.go`` (v1.5.0): a node starts
with ``-config`` (the initial cluster configuration, shared by every node) and
``-local_config`` (its own directories, listeners and, on a target, mountpaths). Sections that
5.0 fills with current defaults when absent (``space``, ``rebalance``, ``log``, ``disk``...)
are left out; the ones it needs spelled out are here: ``auth``, ``backend``, ``proxy``,
``net``, ``timeout``, ``memsys``, ``features``, ``versioning``, ``resilver``, plus
``distributed_sort`` (the binary is built with dSort).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: AuthN's fixed port inside the cluster's private network namespace
AUTHN_PORT = 52001
#: the port inside the namespace that leads to the S3 server of an AWS backend
#: (:meth:`tests.servers.netns.PrivateNetwork.reach`)
S3_INNER_PORT = 52002
#: AIStore's cluster feature flag ``S3-Use-Path-Style`` (bit 14 of ``cmn/feat/feat.go``,
#: v1.5.0): S3 requests as ``http://host/BUCKET/KEY``, which a local S3 server needs (the
#: virtual-hosted ``BUCKET.host`` does not resolve); buckets inherit it
FEATURE_S3_PATH_STYLE = 1 << 14

# ACL bits of AIStore's api/apc/access.go: object GET, HEAD; bucket HEAD, list; list buckets
# and show cluster
_ACE_GET, _ACE_OBJ_HEAD, _ACE_BCK_HEAD, _ACE_OBJ_LIST = 1, 2, 1 << 8, 1 << 9
_ACE_LIST_BUCKETS, _ACE_SHOW_CLUSTER = 1 << 12, 1 << 13
#: permission bits of a read-only role: read objects and list them, on any bucket
READ_ONLY_ACCESS = (
    _ACE_GET | _ACE_OBJ_HEAD | _ACE_BCK_HEAD | _ACE_OBJ_LIST | _ACE_LIST_BUCKETS | _ACE_SHOW_CLUSTER
)


@dataclass(frozen=True)
class AwsBackend:
    """An S3 server on the host that the cluster's ``aws`` backend uses instead of AWS.

    AIStore v1.5.0 (``ais/backend/aws.go``) takes the endpoint from ``S3_ENDPOINT`` (a bucket's
    ``extra.aws.endpoint`` would win), the credentials and region through the AWS SDK's
    default chain (``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``/``AWS_REGION``), and
    path-style addressing from the feature flag :data:`FEATURE_S3_PATH_STYLE`.

    Attributes:
        port: the S3 server's port on the host's ``127.0.0.1``.
        access_key: its access key.
        secret_key: its secret key.
        region: the region to sign for.
    """

    port: int
    access_key: str
    secret_key: str
    region: str = "us-east-1"

    def environ(self, root: Path) -> dict[str, str]:
        """The variables every node starts with; shared AWS config files are pointed at
        ``root/aws-none`` (absent), so none of the host's profiles applies."""
        none = str(root / "aws-none")
        return {
            "S3_ENDPOINT": f"http://127.0.0.1:{S3_INNER_PORT}",
            "AWS_ACCESS_KEY_ID": self.access_key,
            "AWS_SECRET_ACCESS_KEY": self.secret_key,
            "AWS_REGION": self.region,
            "AWS_CONFIG_FILE": none,
            "AWS_SHARED_CREDENTIALS_FILE": none,
            "AWS_EC2_METADATA_DISABLED": "true",
        }


@dataclass(frozen=True)
class Node:
    """One ``aisnode`` process.

    Attributes:
        name: ``proxy``, ``target1``...; also its directory's name.
        role: ``proxy`` or ``target``.
        port: public port (the same number on the host's 127.0.0.1 and inside the namespace).
        port_intra_control: intra-cluster control port (inside the namespace only).
        port_intra_data: intra-cluster data port (inside the namespace only).
        root: the node's directory: ``conf/``, ``log/``, and a target's mountpaths.
        mountpaths: number of mountpaths of a target (a proxy gets the same number and
            ignores it: see :func:`local_config`).
    """

    name: str
    role: str
    port: int
    port_intra_control: int
    port_intra_data: int
    root: Path
    mountpaths: int

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<public port>``."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def log_dir(self) -> Path:
        return self.root / "log"


def cluster_config(
    primary_url: str, *, auth_secret: str | None = None, aws: bool = False
) -> dict[str, Any]:
    """The initial cluster configuration every node starts with.

    Args:
        primary_url: the primary proxy's public URL.
        auth_secret: with a value, clients must present a JWT signed with this HMAC secret
            (HS256, the secret AuthN signs with); without, no client authentication.
        aws: enable the ``aws`` backend (the binary is built with ``-tags aws``), with
            path-style S3 addressing (:class:`AwsBackend` says where it points).
    """
    auth: dict[str, Any] = {"client_auth_required": auth_secret is not None}
    if auth_secret is not None:
        auth["signature"] = {"method": "HS256", "key": auth_secret}
    return {
        "auth": auth,
        "backend": {"aws": {}} if aws else {},
        "proxy": {"primary_url": primary_url, "original_url": primary_url, "discovery_url": ""},
        "net": {
            "l4": {"proto": "tcp", "sndrcv_buf_size": 131072},
            "http": {
                "use_https": False,
                "server_crt": "",
                "server_key": "",
                "idle_conn_time": "6s",
                "idle_conns_per_host": 32,
                "idle_conns": 256,
                "write_buffer_size": 65536,
                "read_buffer_size": 65536,
                "chunked_transfer": True,
                "skip_verify": False,
            },
            "use_ipv6": False,
        },
        "timeout": {
            "cplane_operation": "2s",
            "max_keepalive": "4s",
            "max_host_busy": "20s",
            # the primary declares the cluster started after 4 quiet rounds of startup_time/20
            # once every target has joined: 30s (the least allowed) makes that ~6s, not ~15s
            "startup_time": "30s",
            "join_startup_time": "1m",
            "send_file_time": "5m",
        },
        # a test cluster shares a small machine: ask for little free memory before memsys
        # starts reclaiming (min_free may not be under 100MiB)
        "memsys": {
            "min_free": "256mb",
            "default_buf": "32kb",
            "to_gc": "1gb",
            "hk_time": "3m",
            "min_pct_total": 0,
            "min_pct_free": 0,
        },
        "features": str(FEATURE_S3_PATH_STYLE if aws else 0),
        "versioning": {"enabled": True, "validate_warm_get": False},
        "resilver": {"enabled": True},
        "distributed_sort": {
            "duplicated_records": "ignore",
            "missing_shards": "ignore",
            "ekm_malformed_line": "abort",
            "ekm_missing_key": "abort",
            "default_max_mem_usage": "80%",
            "call_timeout": "10m",
            "dsorter_mem_threshold": "100GB",
            "compression": "never",
            "bundle_multiplier": 4,
        },
    }


def local_config(node: Node) -> dict[str, Any]:
    """The node's own configuration: its directories, listeners and mountpaths.

    Every hostname is 127.0.0.1; inside the private namespace that is the only interface.
    Mountpaths are AIStore's development kind (``test_fspaths``: ``mp1``, ``mp2``... under the
    node's directory), as its ``deploy/dev/local`` scripts make them: real ``fspaths`` must
    each be a filesystem of its own, and a target refuses two on one disk. A non-zero count
    also puts the node in AIStore's testing mode (relaxed ulimit checks), so the proxy gets
    the same count, as the scripts give it.
    """
    return {
        "confdir": str(node.root / "conf"),
        "log_dir": str(node.log_dir),
        "host_net": {
            "hostname": "127.0.0.1",
            "hostname_intra_control": "127.0.0.1",
            "hostname_intra_data": "127.0.0.1",
            "port": str(node.port),
            "port_intra_control": str(node.port_intra_control),
            "port_intra_data": str(node.port_intra_data),
        },
        "fspaths": {},
        "test_fspaths": {"root": str(node.root), "count": node.mountpaths, "instance": 0},
    }


def authn_config(log_dir: Path, secret: str) -> dict[str, Any]:
    """AuthN's ``authn.json``: HTTP on :data:`AUTHN_PORT`, tokens signed with ``secret``."""
    return {
        "log": {"dir": str(log_dir), "level": "3"},
        "net": {"http": {"port": AUTHN_PORT, "use_https": False}},
        "auth": {"secret": secret, "expiration_time": "2h"},
        "timeout": {"default_timeout": "30s"},
    }
