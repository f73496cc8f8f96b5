"""Brace patterns (``shard-{000..099}.tar``): counted before they are expanded, expanded lazily.

The grammar is the ``braceexpand`` package's (what webdataset uses): integer ranges with an
optional step and zero padding (``{07..10}``, ``{0..100..10}``, ``{4..1}``), letter ranges
(``{a..g..2}``), comma lists (``{a,b,}``), nesting (``{a,b{1..3}}``), backslash escapes, and
braces that are neither (``{x}``) kept as text; unbalanced braces are an error. The parser
builds a small tree whose size is known without generating anything, so a pattern that would
expand to millions of names is refused at once with the count, and an accepted pattern is
generated one name at a time (an odometer over the groups, constant memory).

The limit (:data:`DEFAULT_MAX_URLS`) is taken from the ``max_urls`` argument, else the
environment variable ``WDS_CLOUD_MAX_URLS``, else the default, when :func:`max_urls` is called.
"""

from __future__ import annotations

import re
import string
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from wds_cloud.errors import ConfigError
from wds_cloud.settings import env_int

__all__ = ["DEFAULT_MAX_URLS", "ENV_MAX_URLS", "BracePattern", "max_urls", "parse_braces"]

#: URLs one shard specification may expand to unless configured otherwise.
DEFAULT_MAX_URLS = 1_000_000
#: Environment variable that overrides :data:`DEFAULT_MAX_URLS`.
ENV_MAX_URLS = "WDS_CLOUD_MAX_URLS"

_INT_RANGE = re.compile(r"^(-?\d+)\.\.(-?\d+)(?:\.\.-?(\d+))?$")
_CHAR_RANGE = re.compile(r"^([A-Za-z])\.\.([A-Za-z])(?:\.\.-?(\d+))?$")
_ALPHABET = string.ascii_uppercase + string.ascii_lowercase
_ESCAPE = re.compile(r"\\(.)")


def max_urls(value: int | None = None) -> int:
    """The expansion limit: ``value`` > ``WDS_CLOUD_MAX_URLS`` > :data:`DEFAULT_MAX_URLS`.

    Raises:
        ConfigError: the value is not a positive integer.
    """
    source = "max_urls"
    if value is None:
        value = env_int(ENV_MAX_URLS, None)
        if value is None:
            return DEFAULT_MAX_URLS
        source = ENV_MAX_URLS
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{source} must be a positive integer, got {value!r}")
    return value


# -- the tree ----------------------------------------------------------------------------------


class _Node:
    count: int

    def iterate(self) -> Iterator[str]:
        raise NotImplementedError


@dataclass
class _Choice(_Node):
    """Literal text (one value) or a letter range (its letters)."""

    values: Sequence[str]

    def __post_init__(self) -> None:
        self.count = len(self.values)

    def iterate(self) -> Iterator[str]:
        return iter(self.values)


@dataclass
class _IntRange(_Node):
    start: int
    stop: int
    step: int
    width: int

    def __post_init__(self) -> None:
        self.count = (self.stop - self.start) // self.step + 1

    def iterate(self) -> Iterator[str]:
        fmt = f"%0{self.width}d"
        return (
            fmt % i for i in range(self.start, self.stop + (1 if self.step > 0 else -1), self.step)
        )


@dataclass
class _Sequence(_Node):
    """A comma list: the items one after the other."""

    items: list[_Node]

    def __post_init__(self) -> None:
        self.count = sum(item.count for item in self.items)

    def iterate(self) -> Iterator[str]:
        for item in self.items:
            yield from item.iterate()


@dataclass
class _Product(_Node):
    """Consecutive parts: every combination, the last part varying fastest."""

    parts: list[_Node]

    def __post_init__(self) -> None:
        count = 1
        for part in self.parts:
            count *= part.count
        self.count = count

    def iterate(self) -> Iterator[str]:
        parts = self.parts
        last = len(parts) - 1
        if last < 0:
            yield ""
            return
        iterators: list[Iterator[str]] = [parts[0].iterate()]
        chosen = [""] * len(parts)
        while iterators:
            level = len(iterators) - 1
            try:
                chosen[level] = next(iterators[level])
            except StopIteration:
                iterators.pop()
                continue
            if level == last:
                name = "".join(chosen)
                # as braceexpand: escapes are removed from every joined group, nested ones too
                yield _ESCAPE.sub(r"\1", name) if "\\" in name else name
            else:
                iterators.append(parts[level + 1].iterate())


# -- parsing (mirrors braceexpand 0.1.7 rule for rule; tests compare the two) ----------------


class _Unbalanced(Exception):
    pass


def _unescaped(text: str) -> Iterator[tuple[int, str]]:
    """``(position, character)`` of every character of ``text`` that is not escaped: a
    backslash and the character after it are passed over."""
    pos = 0
    while pos < len(text):
        if text[pos] == "\\":
            pos += 2
            continue
        yield pos, text[pos]
        pos += 1


def _parse_pattern(text: str) -> _Product:
    parts: list[_Node] = []
    start = depth = 0
    for pos, char in _unescaped(text):
        if char == "{":
            if depth == 0 and pos > start:
                parts.append(_Choice([text[start:pos]]))
                start = pos
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                expr = text[start + 1 : pos]
                node = _parse_expression(expr)
                if node is None:  # neither a range nor a list: the braces are text
                    parts.extend([_Choice(["{"]), _parse_pattern(expr), _Choice(["}"])])
                else:
                    parts.append(node)
                start = pos + 1
    if depth != 0:
        raise _Unbalanced
    if start < len(text):
        parts.append(_Choice([text[start:]]))
    return _Product(parts)


def _parse_expression(expr: str) -> _Node | None:
    match = _INT_RANGE.match(expr)
    if match:
        first, last, step_text = match.groups()
        padded = any(s.startswith(("0", "-0")) for s in (first, last) if s not in ("0", "-0"))
        width = max(len(first), len(last)) if padded else 0
        step = (int(step_text) or 1) if step_text else 1
        start, stop = int(first), int(last)
        return _IntRange(start, stop, step if start < stop else -step, width)
    match = _CHAR_RANGE.match(expr)
    if match:
        first, last, step_text = match.groups()
        step = (int(step_text) or 1) if step_text else 1
        i, j = _ALPHABET.index(first), _ALPHABET.index(last)
        if i < j:
            return _Choice(_ALPHABET[i : j + 1 : step])
        return _Choice(_ALPHABET[i : (j or -len(_ALPHABET)) - 1 : -step])
    return _parse_sequence(expr)


def _parse_sequence(text: str) -> _Sequence | None:
    items: list[_Node] = []
    start = depth = 0
    for pos, char in _unescaped(text):
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
        elif char == "," and depth == 0:
            items.append(_parse_pattern(text[start:pos]))
            start = pos + 1
    if depth != 0 or not items:
        return None
    items.append(_parse_pattern(text[start:]))
    return _Sequence(items)


# -- public ------------------------------------------------------------------------------------


def _shorten(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else f"{text[: limit - 20]}...{text[-17:]}"


def describe_count(count: int) -> str:
    """``count`` with thousands separators, or its order of magnitude when it is enormous."""
    if count.bit_length() > 200:
        return f"about 10^{int((count.bit_length() - 1) * 0.30103)}"
    return f"{count:,}"


@dataclass
class BracePattern:
    """One parsed pattern: ``count`` names, generated lazily by ``iter(pattern)``.

    Attributes:
        text: the pattern as given.
        count: how many names it expands to (computed, nothing generated).
    """

    text: str
    count: int
    _tree: _Node

    def __iter__(self) -> Iterator[str]:
        return self._tree.iterate()


def parse_braces(text: str, *, shown: str | None = None) -> BracePattern:
    """Parse a brace pattern; nothing is expanded.

    Args:
        text: the pattern.
        shown: how to name the pattern in errors (default: ``text``; pass a redacted form).

    Raises:
        ConfigError: unbalanced braces, naming the pattern.
    """
    try:
        tree = _parse_pattern(text)
    except _Unbalanced:
        name = _shorten(text if shown is None else shown)
        raise ConfigError(
            f"bad brace pattern in shard URL {name!r}: unbalanced braces (every '{{' needs a "
            "'}'; write a literal brace as '\\{' or '\\}')"
        ) from None
    return BracePattern(text, tree.count, tree)


def check_count(pattern: BracePattern, limit: int, *, shown: str | None = None) -> None:
    """Refuse ``pattern`` when it expands to more than ``limit`` names.

    Raises:
        ConfigError: naming the pattern, its count and how to raise the limit.
    """
    if pattern.count > limit:
        name = _shorten(pattern.text if shown is None else shown)
        raise ConfigError(
            f"shard URL pattern {name!r} expands to {describe_count(pattern.count)} URLs, "
            f"more than the limit of {limit:,} (pass max_urls= or set {ENV_MAX_URLS} to "
            "raise it)"
        )
