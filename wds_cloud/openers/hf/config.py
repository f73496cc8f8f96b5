"""Settings of the ``hf://`` backend: :class:`HfConfig`, resolved by :data:`HF_SETTINGS`.

The token comes, first found wins, from: the ``token`` argument, ``WDS_CLOUD_HF_TOKEN``,
``HF_TOKEN``, ``HUGGING_FACE_HUB_TOKEN`` (the older name ``huggingface_hub`` still reads), then
the token file ``huggingface-cli login`` writes: ``HF_TOKEN_PATH``, else ``$HF_HOME/token``,
else ``$XDG_CACHE_HOME/huggingface/token``, else ``~/.cache/huggingface/token``. An empty value
means no token. The endpoint: ``endpoint``, ``WDS_CLOUD_HF_ENDPOINT``, ``HF_ENDPOINT``, else
``https://huggingface.co``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self

from wds_cloud.errors import ConfigError
from wds_cloud.settings import TEXT, ConfigTable, Field, Kind

__all__ = ["DEFAULT_ENDPOINT", "HF_SETTINGS", "TOKEN_VARIABLES", "HfConfig", "token_file"]

DEFAULT_ENDPOINT = "https://huggingface.co"

#: the variables that hold a token, first to last in precedence (after WDS_CLOUD_HF_TOKEN)
TOKEN_VARIABLES = ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN")


def token_file(environ: Mapping[str, str] | None = None) -> Path:
    """Where ``huggingface_hub`` keeps the token of ``huggingface-cli login``."""
    env = os.environ if environ is None else environ
    if env.get("HF_TOKEN_PATH"):
        return Path(env["HF_TOKEN_PATH"]).expanduser()
    if env.get("HF_HOME"):
        return Path(env["HF_HOME"]).expanduser() / "token"
    cache = env.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(cache) / "huggingface" / "token"


def _read_token(environ: Mapping[str, str] | None) -> str | None:
    """The token of ``HF_TOKEN`` / ``HUGGING_FACE_HUB_TOKEN``, else of the token file; None
    when neither holds one (an unreadable file is no token)."""
    env = os.environ if environ is None else environ
    for name in TOKEN_VARIABLES:
        if env.get(name, "").strip():  # empty: not set (huggingface_hub's rule)
            return env[name].strip()
    try:
        return token_file(env).read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None


def _endpoint(text: str, source: str) -> str:
    """The Hub's base URL, without a trailing ``/``."""
    base = text.rstrip("/")
    scheme, sep, host = base.partition("://")
    if scheme not in ("http", "https") or not sep or not host:
        raise ConfigError(
            f"{source}={text!r} is not the Hub's base URL: it must be an http:// or https:// "
            "URL, e.g. https://huggingface.co"
        )
    return base


#: How each :class:`HfConfig` field is resolved (``docs/hf.md`` has the table in words).
HF_SETTINGS = ConfigTable(
    section="HF",
    owner="HfConfig",
    what="Hugging Face Hub",
    fields=(
        Field(
            "endpoint", Kind("an http(s) URL", _endpoint), DEFAULT_ENDPOINT, env=("HF_ENDPOINT",)
        ),
        Field("token", TEXT, "", env=TOKEN_VARIABLES, read_env=_read_token, secret=True),
    ),
)


@dataclass(frozen=True)
class HfConfig:
    """Hugging Face Hub settings; None fields are resolved from the environment, then defaults.

    The HTTP side (timeouts, retries, redirects, prefetch) is the HTTP backend's
    :class:`~wds_cloud.openers.http.config.HttpConfig` (``WDS_CLOUD_HTTP_*``).

    Attributes:
        endpoint: the Hub's base URL (``HF_ENDPOINT``; default ``https://huggingface.co``).
        token: a Hub access token sent as ``Authorization: Bearer`` to the endpoint's origin
            only (never to the CDN the Hub redirects reads to); ``""``: none. See the module
            docstring for where it is looked for. Never shown.
    """

    endpoint: str | None = None
    token: str | None = None

    def __repr__(self) -> str:
        from wds_cloud.redact import config_repr

        return config_repr(self, secrets=("token",))

    def resolve(
        self,
        overrides: Mapping[str, Any] | None = None,
        *,
        environ: Mapping[str, str] | None = None,
    ) -> Self:
        """A copy with ``overrides`` applied, then every None field filled from the
        environment (``environ``, default ``os.environ``) or the default
        (:data:`HF_SETTINGS`).

        Raises:
            ConfigError: an unknown override, or an invalid value.
        """
        return HF_SETTINGS.resolve(self, overrides, environ=environ)
