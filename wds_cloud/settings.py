"""Typed settings: the one place that reads a setting's text from the environment, and the
one check of configuration overrides and ``open()`` options.

Every environment variable wds_cloud reads (``WDS_CLOUD_*``, webdataset's ``WDS_*`` and the
backends' own ``AWS_*``/``AIS_*``/``GOOGLE_*`` names) goes through these readers, when an object
is created or a function is called, never at import. One rule per type:

- unset, or blank (only whitespace): the default;
- booleans (case-insensitive, surrounding whitespace ignored): true is ``1``, ``true``,
  ``yes``, ``on`` or any other non-zero integer (webdataset reads its switches with ``int()``,
  so ``WDS_SECURE=2`` stays on); false is ``0``, ``false``, ``no``, ``off``;
- integers: Python's ``int()`` (``1_000`` is accepted); numbers: ``float()``;
- choices: case-insensitive, returned lower-case;
- byte sizes (:func:`parse_bytes`): a number with an optional binary unit ``K``, ``M``, ``G``,
  ``T`` (``KB``, ``KiB``, ``Ki`` the same; case-insensitive); each caller says whether
  fractions, ``1e11`` notation or a sign are accepted;

anything else raises :class:`~wds_cloud.errors.ConfigError` naming the variable and its value.
"""

from __future__ import annotations

import os
import re
from collections.abc import Collection, Iterable, Mapping
from dataclasses import fields, replace
from typing import Any, TypeVar

from wds_cloud.errors import ConfigError

__all__ = [
    "FALSE",
    "TRUE",
    "apply_overrides",
    "env_bool",
    "env_bytes",
    "env_choice",
    "env_first",
    "env_float",
    "env_int",
    "env_str",
    "parse_bool",
    "parse_bytes",
    "parse_float",
    "parse_int",
    "reject_unknown_options",
]

TRUE = frozenset({"1", "true", "yes", "on"})
FALSE = frozenset({"0", "false", "no", "off"})

D = TypeVar("D")
C = TypeVar("C")
N = TypeVar("N", int, float)


def _raw(name: str, environ: Mapping[str, str] | None) -> str | None:
    """The stripped value of ``name``, or None when it is unset or blank."""
    env = os.environ if environ is None else environ
    value = env.get(name)
    if value is None or not value.strip():
        return None
    return value.strip()


def parse_bool(text: str, source: str) -> bool:
    """``text`` as a boolean by the module's rule; ``source`` names it in the error.

    Raises:
        ConfigError: not one of the boolean spellings nor an integer.
    """
    low = text.strip().lower()
    if low in TRUE:
        return True
    if low in FALSE:
        return False
    try:
        return int(low) != 0
    except ValueError:
        raise ConfigError(
            f"{source}={text!r} is not a boolean (use 1/0, true/false, yes/no or on/off)"
        ) from None


def _parse(kind: type[N], text: str, source: str, what: str) -> N:
    try:
        return kind(text.strip())
    except ValueError:
        raise ConfigError(f"{source}={text!r} is not {what}") from None


def parse_int(text: str, source: str) -> int:
    """``text`` as an integer (Python's ``int()``).

    Raises:
        ConfigError: not an integer.
    """
    return _parse(int, text, source, "an integer")


def parse_float(text: str, source: str) -> float:
    """``text`` as a number (Python's ``float()``).

    Raises:
        ConfigError: not a number.
    """
    return _parse(float, text, source, "a number")


BYTE_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
_BYTES = re.compile(r"([+-]?)((?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:E[+-]?[0-9]+)?)\s*([KMGT]?)(I?B?)")


def parse_bytes(
    text: str,
    source: str,
    *,
    fraction: bool = True,
    exponent: bool = False,
    signed: bool = False,
) -> int:
    """``text`` as a number of bytes: ``4096``, ``64M``, ``64MiB``, ``1.5 GB``, ``2Ki``...

    Every unit is binary (``K`` is 1024, ``KB`` too, as AIStore reads sizes); ``B`` alone is
    bytes. A whole number is exact; a fraction or an exponent is computed in floating point
    and truncated (``int(float(number) * unit)``).

    Args:
        text: the text (surrounding whitespace ignored).
        source: the setting's name, for the error.
        fraction: accept ``1.5M`` and ``.5G``.
        exponent: accept ``1e11`` notation.
        signed: accept a leading ``+`` or ``-`` (a negative result is the caller's to judge).

    Raises:
        ConfigError: not a byte count in that syntax (the message names ``source``).
    """
    match = _BYTES.fullmatch(text.strip().upper())
    if match is not None:
        sign, number, prefix, suffix = match.groups()
        ok = (
            (signed or not sign)
            and (fraction or "." not in number)
            and (exponent or "E" not in number)
            and (prefix or suffix in ("", "B"))
        )
        if ok:
            scale = BYTE_UNITS[prefix]
            try:
                value = int(number) * scale if number.isdigit() else int(float(number) * scale)
            except OverflowError:
                pass
            else:
                return -value if sign == "-" else value
    raise ConfigError(f"{source}={text!r} is not a byte count")


def env_bytes(
    name: str,
    default: D,
    *,
    environ: Mapping[str, str] | None = None,
    fraction: bool = True,
    exponent: bool = False,
    signed: bool = False,
) -> int | D:
    """``name`` as a number of bytes (:func:`parse_bytes`), or ``default`` when unset or blank.

    Raises:
        ConfigError: not a byte count.
    """
    value = _raw(name, environ)
    if value is None:
        return default
    return parse_bytes(value, name, fraction=fraction, exponent=exponent, signed=signed)


def env_first(
    names: Iterable[str], environ: Mapping[str, str] | None = None
) -> tuple[str, str] | None:
    """``(name, value)`` of the first of ``names`` that is set and not blank, else None."""
    for name in names:
        value = _raw(name, environ)
        if value is not None:
            return name, value
    return None


def env_str(name: str, default: D, *, environ: Mapping[str, str] | None = None) -> str | D:
    """The value of ``name`` (stripped), or ``default`` when it is unset or blank."""
    value = _raw(name, environ)
    return default if value is None else value


def env_bool(name: str, default: D, *, environ: Mapping[str, str] | None = None) -> bool | D:
    """``name`` as a boolean (see the module docstring), or ``default`` when unset or blank.

    Raises:
        ConfigError: a value that is no boolean spelling.
    """
    value = _raw(name, environ)
    return default if value is None else parse_bool(value, name)


def env_int(name: str, default: D, *, environ: Mapping[str, str] | None = None) -> int | D:
    """``name`` as an integer, or ``default`` when unset or blank.

    Raises:
        ConfigError: not an integer.
    """
    value = _raw(name, environ)
    return default if value is None else parse_int(value, name)


def env_float(name: str, default: D, *, environ: Mapping[str, str] | None = None) -> float | D:
    """``name`` as a number, or ``default`` when unset or blank.

    Raises:
        ConfigError: not a number.
    """
    value = _raw(name, environ)
    return default if value is None else parse_float(value, name)


def env_choice(
    name: str,
    choices: Collection[str],
    default: D,
    *,
    environ: Mapping[str, str] | None = None,
) -> str | D:
    """``name`` lower-cased, which must be one of ``choices``; ``default`` when unset or blank.

    Raises:
        ConfigError: a value not in ``choices`` (they are named).
    """
    value = _raw(name, environ)
    if value is None:
        return default
    low = value.lower()
    if low not in choices:
        raise ConfigError(f"{name}={value!r} is not one of {', '.join(sorted(choices))}")
    return low


def apply_overrides(config: C, overrides: Mapping[str, Any] | None, what: str) -> C:
    """A copy of the dataclass ``config`` with ``overrides`` replacing its fields.

    Args:
        config: a dataclass instance (a backend config).
        overrides: field name -> value; None or empty returns ``config`` itself.
        what: the backend, for the message (``"S3"``, ``"HTTP"``, ...).

    Raises:
        ConfigError: a key that is not a field, naming the known ones.
    """
    if not overrides:
        return config
    names = {f.name for f in fields(config)}  # type: ignore[arg-type]
    unknown = sorted(set(overrides) - names)
    if unknown:
        raise ConfigError(f"unknown {what} settings {unknown}; known: {sorted(names)}")
    return replace(config, **overrides)  # type: ignore[type-var]


def reject_unknown_options(
    options: Mapping[str, Any], allowed: Collection[str], where: str
) -> None:
    """Raise unless every key of ``options`` is in ``allowed``.

    Args:
        options: the keyword options a method was given.
        allowed: the names it accepts.
        where: the method, for the message (``"s3 open()"``, ``"pipe: open()"``).

    Raises:
        ConfigError: an unknown option, naming it and the allowed ones.
    """
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        raise ConfigError(f"unknown options {unknown} for {where}; allowed: {sorted(allowed)}")
