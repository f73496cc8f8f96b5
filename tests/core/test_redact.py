"""redact_url and mask: what people see never carries a credential."""

from __future__ import annotations

import pytest

from wds_cloud.redact import mask, redact_url


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("http://user:PW@host:8/x.tar", "http://user:***@host:8/x.tar"),
        ("https://TOKEN@host/x.tar", "https://***@host/x.tar"),
        (
            "https://b.s3.amazonaws.com/k.tar?X-Amz-Credential=AK&X-Amz-Signature=S&v=1",
            "https://b.s3.amazonaws.com/k.tar?X-Amz-Credential=***&X-Amz-Signature=***&v=1",
        ),
        ("https://h/x.tar?token=T#frag", "https://h/x.tar?token=***#frag"),
        ("pipe:curl -s http://u:PW@h/x.tar", "pipe:curl -s http://u:***@h/x.tar"),
        ("s3://bucket/key.tar", "s3://bucket/key.tar"),
        ("/data/shard:1.tar", "/data/shard:1.tar"),
        ("http://h/x.tar?a=1&b=2", "http://h/x.tar?a=1&b=2"),
    ],
)
def test_redact_url(url: str, shown: str) -> None:
    assert redact_url(url) == shown
    for secret in ("PW", "TOKEN", "AK", "=S&", "=T#"):
        if secret not in shown:
            assert secret not in redact_url(url)


def test_mask() -> None:
    assert mask("secret") == "'***'"
    assert mask(None) == "None"
