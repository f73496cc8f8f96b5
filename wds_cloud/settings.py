"""Typed settings: the one place that reads a setting's text from the environment, the one
resolver of every backend config, and the one check of configuration overrides and ``open()``
options.

Every environment variable wds_cloud reads (``WDS_CLOUD_*``, webdataset's ``WDS_*`` and the
backends' own ``AWS_*``/``AIS_*``/``GOOGLE_*`` names) goes through these readers, when an object
is created or a function is called, never at import. One rule per type:

- unset, or blank (only whitespace): the default;
- booleans (case-insensitive, surrounding whitespace ignored): true is ``1``, ``true``,
  ``yes``, ``on`` or any other non-zero integer (webdataset reads its switches with ``int()``,
  so ``WDS_SECURE=2`` stays on); false is ``0``, ``false``, ``no``, ``off``;
- integers: Python's ``int()`` (``1_000`` is accepted); numbers: ``float()``;
- durations (:func:`parse_seconds`): a number of seconds >= 0 with an optional unit ``ms``,
  ``s``, ``m`` or ``h`` (case-insensitive): ``30``, ``2.5``, ``30s``, ``1.5m``, ``500ms``,
  ``inf``; a bare number is seconds, so every value read with ``float()`` before still is;
- choices: case-insensitive, returned lower-case;
- byte sizes (:func:`parse_bytes`): a number with an optional binary unit ``K``, ``M``, ``G``,
  ``T`` (``KB``, ``KiB``, ``Ki`` the same; case-insensitive), digits grouped with ``_`` as
  ``int()`` allows; each caller says whether fractions, ``1e11`` notation or a sign are
  accepted;

anything else raises :class:`~wds_cloud.errors.ConfigError` naming the variable and its value.

Backend configs are resolved by a :class:`ConfigTable`: one :class:`Field` per dataclass field
(its :class:`Kind`, default and the backend's own variables), and one order for all of them:
argument > ``WDS_CLOUD_<SECTION>_<FIELD>`` > the backend's own variables > default.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, fields, replace
from typing import TYPE_CHECKING, Any, TypeAlias, TypeVar

from wds_cloud.errors import ConfigError

__all__ = [
    "BOOL",
    "BYTES",
    "FALSE",
    "INT",
    "SECONDS",
    "TEXT",
    "TRUE",
    "ConfigTable",
    "Field",
    "Kind",
    "above",
    "apply_overrides",
    "at_least",
    "bytes_kind",
    "choice",
    "env_bool",
    "env_bytes",
    "env_choice",
    "env_first",
    "env_float",
    "env_int",
    "env_str",
    "multiple_of",
    "parse_bool",
    "parse_bytes",
    "parse_float",
    "parse_int",
    "parse_seconds",
    "reject_unknown_options",
]

TRUE = frozenset({"1", "true", "yes", "on"})
FALSE = frozenset({"0", "false", "no", "off"})

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

D = TypeVar("D")
DC = TypeVar("DC", bound="DataclassInstance")
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
_DIGITS = r"[0-9]+(?:_[0-9]+)*"
_BYTES = re.compile(
    rf"([+-]?)((?:{_DIGITS}(?:\.(?:{_DIGITS})?)?|\.{_DIGITS})(?:E[+-]?{_DIGITS})?)\s*([KMGT]?)(I?B?)"
)


def parse_bytes(
    text: str,
    source: str,
    *,
    fraction: bool = True,
    exponent: bool = False,
    signed: bool = False,
) -> int:
    """``text`` as a number of bytes: ``4096``, ``64M``, ``64MiB``, ``1.5 GB``, ``2Ki``, ``1_048_576``...

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
                whole = number.replace("_", "").isdigit()
                value = int(number) * scale if whole else int(float(number) * scale)
            except OverflowError:
                pass
            else:
                return -value if sign == "-" else value
    raise ConfigError(f"{source}={text!r} is not a byte count")


_DURATION = re.compile(r"(.*?)\s*(ms|s|m|h)?", re.IGNORECASE)
_UNITS = {"": (1, 1), "ms": (1, 1000), "s": (1, 1), "m": (60, 1), "h": (3600, 1)}
DURATION_SYNTAX = "a number of seconds >= 0, optionally with a unit: 30, 30s, 1.5m, 500ms, 2h"


def parse_seconds(text: str, source: str) -> float:
    """``text`` as a duration in seconds: ``30``, ``2.5``, ``30s``, ``1.5m``, ``500ms``, ``2h``.

    The number is read with ``float()`` (``1e3`` and ``inf`` included, ``nan`` not), then
    multiplied by its unit (``ms``, ``s``, ``m``, ``h``, case-insensitive; none is seconds).

    Raises:
        ConfigError: not a duration, or a negative one (the message names ``source``).
    """
    match = _DURATION.fullmatch(text.strip())
    assert match is not None  # ".*?" matches any text
    number, unit = match.groups()
    try:
        times, per = _UNITS[(unit or "").lower()]
        value = float(number) * times / per
    except ValueError:
        value = math.nan
    if not value >= 0:
        raise ConfigError(f"{source}={text!r} is not a number of seconds ({DURATION_SYNTAX})")
    return value


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


def default_seed(environ: Mapping[str, str] | None = None) -> int:
    """``$WDS_SEED`` (or ``$WDS_CLOUD_SEED``), else 0: the seed of every seeded order
    (``WebDataset``'s shard shuffle, ``make_loader``, the global shuffle) when none is given.

    Raises:
        ConfigError: a value that is not an integer.
    """
    found = env_first(("WDS_SEED", "WDS_CLOUD_SEED"), environ)
    return 0 if found is None else parse_int(found[1], found[0])


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


# -- the config resolver ------------------------------------------------------------------------


def _reject(value: Any) -> Any:
    raise ValueError(value)


def _integer(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(value)
    return value


def _seconds(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:
        raise ValueError(value)
    return float(value)


def _boolean(value: Any) -> bool:
    if not isinstance(value, int):  # bool is an int; an integer is a boolean as in the text rule
        raise ValueError(value)
    return bool(value)


def _text(value: Any) -> str:
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if not isinstance(value, str):
        raise ValueError(value)
    return value


@dataclass(frozen=True)
class Kind:
    """How a setting of one type is read.

    Attributes:
        what: the type in words, for errors (``"an integer"``).
        parse: ``parse(text, source)``: the value of a variable's text, or of a string
            argument; raises :class:`ConfigError` naming ``source`` and the text.
        accept: ``accept(value)``: the value of a typed (not string) argument; raises
            ``ValueError`` or ``TypeError`` when it is not of this kind.
    """

    what: str
    parse: Callable[[str, str], Any]
    accept: Callable[[Any], Any] = _reject


#: Text as given (a variable's text is stripped; an argument is taken verbatim).
TEXT = Kind("a string", lambda text, source: text, _text)
#: The boolean rule of the module docstring.
BOOL = Kind("a boolean", parse_bool, _boolean)
#: Python's ``int()``.
INT = Kind("an integer", parse_int, _integer)
#: :func:`parse_seconds`; a number argument is seconds.
SECONDS = Kind("a number of seconds", parse_seconds, _seconds)


def _truncated(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(value)
    return int(value)


def bytes_kind(*, fraction: bool = False, exponent: bool = False) -> Kind:
    """Byte sizes by :func:`parse_bytes` (a sign accepted: the field's checks bound it); an
    integer argument is bytes (with ``fraction``, a float too, truncated)."""

    def parse(text: str, source: str) -> int:
        return parse_bytes(text, source, fraction=fraction, exponent=exponent, signed=True)

    return Kind("a byte count", parse, _truncated if fraction else _integer)


#: Whole byte sizes: ``4194304``, ``4M``, ``4MiB``, ``1_048_576``.
BYTES = bytes_kind()


def choice(*names: str, aliases: Mapping[str, str] | None = None) -> Kind:
    """One of ``names`` (or an alias of one), case-insensitive, returned canonical."""
    table = {name: name for name in names} | dict(aliases or {})

    def parse(text: str, source: str) -> str:
        try:
            return table[text.strip().lower()]
        except KeyError:
            raise ConfigError(
                f"{source}={text!r} is not one of {', '.join(sorted(table))}"
            ) from None

    return Kind(f"one of {', '.join(sorted(table))}", parse)


Check: TypeAlias = Callable[[Any], str | None]


def at_least(least: float, shown: str | None = None) -> Check:
    """A check: the value is ``>= least`` (``shown`` is how the message writes it)."""
    return lambda value: None if value >= least else f"must be at least {shown or least}"


def above(least: float) -> Check:
    """A check: the value is ``> least``."""
    return lambda value: None if value > least else f"must be > {least:g}"


def multiple_of(step: int) -> Check:
    """A check: the value is a multiple of ``step``."""
    return lambda value: None if value % step == 0 else f"must be a multiple of {step}"


@dataclass(frozen=True)
class Field:
    """One setting of a config: its name, how it is read, its default and the backend's own
    variables.

    Attributes:
        name: the dataclass field; its variable is ``WDS_CLOUD_<SECTION>_<NAME>``.
        kind: how its text and a typed argument are read.
        default: the value when neither the argument nor a variable gives one.
        env: the backend's own variables (``AWS_REGION``...), after ours; the first one set
            wins.
        derive: ``derive(resolved)`` replaces ``default``: the default computed from the
            fields resolved before this one (the table's order).
        checks: each returns a complaint (``"must be at least 1"``) or None.
        read_env: replaces the reading of ``env`` for a value made of several variables:
            ``read_env(environ)`` is the value, or None when none of them is set.
        secret: never show the value in an error.
        argument: the owner's name for it where that differs from ``name`` (errors name
            ``Owner.argument``).
    """

    name: str
    kind: Kind
    default: Any = None
    env: tuple[str, ...] = ()
    derive: Callable[[Mapping[str, Any]], Any] | None = None
    checks: tuple[Check, ...] = ()
    read_env: Callable[[Mapping[str, str] | None], Any] | None = None
    secret: bool = False
    argument: str | None = None


@dataclass(frozen=True)
class ConfigTable:
    """The fields of one config, resolved in this order, each the same way: argument >
    ``WDS_CLOUD_<SECTION>_<FIELD>`` > the field's ``env`` > its default.

    A string argument is read like a variable's text; any other argument must be of the
    field's kind. ``None`` is "not given".

    Attributes:
        section: the variables' word (``"S3"``: ``WDS_CLOUD_S3_RETRIES``); ``""`` for a
            setting of its own (``WDS_CLOUD_READAHEAD``).
        owner: names an argument in errors (``"S3Config"``: ``S3Config.retries=-1``).
        what: the backend in the unknown-override message (``"unknown S3 settings"``).
        fields: every field, in resolution order.
    """

    section: str
    owner: str
    what: str
    fields: tuple[Field, ...]

    def field(self, name: str) -> Field:
        """The field called ``name``.

        Raises:
            KeyError: no such field.
        """
        for f in self.fields:
            if f.name == name:
                return f
        raise KeyError(name)

    def variable(self, name: str) -> str:
        """Our variable of field ``name``: ``WDS_CLOUD_<SECTION>_<NAME>``."""
        return "_".join(w for w in ("WDS_CLOUD", self.section, name.upper()) if w)

    def variables(self, name: str) -> tuple[str, ...]:
        """Every variable of field ``name``, first to last in precedence."""
        return (self.variable(name), *self.field(name).env)

    def values(
        self, given: Mapping[str, Any], *, environ: Mapping[str, str] | None = None
    ) -> dict[str, Any]:
        """Every field's value: ``given[name]`` unless it is None, else the environment
        (``environ``, default ``os.environ``), else the default.

        Raises:
            ConfigError: a value that is not of the field's kind or fails a check, naming
                the variable (or ``Owner.field``) and the value.
        """
        out: dict[str, Any] = {}
        for f in self.fields:
            out[f.name] = self._value(f, given.get(f.name), environ, out)
        return out

    def resolve(
        self,
        config: DC,
        overrides: Mapping[str, Any] | None = None,
        *,
        environ: Mapping[str, str] | None = None,
    ) -> DC:
        """A copy of the dataclass ``config`` with ``overrides`` applied
        (:func:`apply_overrides`), then every field resolved by :meth:`values`.

        Raises:
            ConfigError: an unknown override, or a bad value.
        """
        base = apply_overrides(config, overrides, self.what)
        given = {f.name: getattr(base, f.name) for f in self.fields}
        return replace(base, **self.values(given, environ=environ))

    def _value(
        self,
        f: Field,
        value: Any,
        environ: Mapping[str, str] | None,
        resolved: Mapping[str, Any],
    ) -> Any:
        if value is not None:
            source, shown = f"{self.owner}.{f.argument or f.name}", value
            if isinstance(value, str):
                value = f.kind.parse(value, source)
            else:
                try:
                    value = f.kind.accept(value)
                except (TypeError, ValueError, OverflowError):
                    raise ConfigError(f"{source}={_show(f, shown)} is not {f.kind.what}") from None
        else:
            found = env_first(
                (self.variable(f.name),) if f.read_env else self.variables(f.name), environ
            )
            if found is not None:
                source, shown = found
                value = f.kind.parse(shown, source)
            elif f.read_env is not None and (value := f.read_env(environ)) is not None:
                return value  # read_env checked its variables
            else:
                return f.derive(resolved) if f.derive is not None else f.default
        for check in f.checks:
            complaint = check(value)
            if complaint is not None:
                raise ConfigError(f"{source}={_show(f, shown)} {complaint}")
        return value


def _show(f: Field, value: Any) -> str:
    return "<hidden>" if f.secret else repr(value)


def apply_overrides(config: DC, overrides: Mapping[str, Any] | None, what: str) -> DC:
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
    names = {f.name for f in fields(config)}
    unknown = sorted(set(overrides) - names)
    if unknown:
        raise ConfigError(f"unknown {what} settings {unknown}; known: {sorted(names)}")
    return replace(config, **overrides)


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
