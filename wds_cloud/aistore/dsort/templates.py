"""dSort name templates and sizes, parsed with the AIStore server's rules.

Templates follow ``cmn/cos/template.go`` (bash ``{a..b[..s]}``, at ``@N``, fmt ``%0Nd``, else a
prefix); sizes follow ``cos.ParseSize(s, "iec")``: every K/M/G/T suffix is binary.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from wds_cloud.errors import ConfigError, DsortSpecError
from wds_cloud.settings import parse_bytes

_MAX_INT32 = 2**31 - 1


def parse_size(value: str | int, *, field: str = "output_shard_size") -> int:
    """Parses a dSort size string the way the server does (``cos.ParseSize(s, "iec")``).

    Every K/M/G/T suffix is binary: ``"10KB"`` is 10240, ``"1.5MB"`` is 1572864.

    Args:
        value: a size string (``"64MiB"``, ``"100MB"``, ``"4096"``, ``""`` for 0) or bytes.
        field: the spec key named in errors.

    Returns:
        The size in bytes.

    Raises:
        DsortSpecError: malformed or negative size.
    """
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise DsortSpecError(f"expected a size string such as '64MiB', got {value!r}", field=field)
    if isinstance(value, int):
        if value < 0:
            raise DsortSpecError(f"size must be >= 0 (got {value})", field=field)
        return value
    text = value.strip()
    if text.startswith("-"):
        raise DsortSpecError(f"size must be >= 0 (got {value!r})", field=field)
    if not text:
        return 0
    try:
        return parse_bytes(text, field)
    except ConfigError:
        raise DsortSpecError(
            f"malformed size {value!r} (expecting e.g. '64MiB', '1.5GiB', '4096'; "
            "units K, M, G, T with optional B/iB, all binary)",
            field=field,
        ) from None


@dataclass(frozen=True)
class _Range:
    start: int
    end: int
    step: int
    width: int
    gap: str


@dataclass(frozen=True)
class Template:
    """A parsed AIStore name template (``bash``, ``at`` or ``fmt`` style, or prefix-only).

    Attributes:
        text: the template as written.
        style: ``"bash"``, ``"at"``, ``"fmt"`` or ``"prefix"``.
        prefix: text before the first range.
        ranges: the ranges, the last one varying fastest.
    """

    text: str
    style: str
    prefix: str
    ranges: tuple[_Range, ...]

    @property
    def count(self) -> int:
        """Number of names the template expands to (huge for ``fmt`` templates)."""
        total = 1
        for r in self.ranges:
            total *= (r.end - r.start) // r.step + 1
        return total

    @property
    def bounded(self) -> bool:
        """False for unbounded templates (``%06d``), which need ``output_shard_size``."""
        return bool(self.ranges) and self.count <= _MAX_INT32

    def names(self) -> Iterator[str]:
        """Yields the names in the server's order (last range fastest, ``min``-width padding)."""
        if not self.ranges:
            yield self.prefix
            return
        at = [r.start for r in self.ranges]
        while True:
            yield self.prefix + "".join(
                f"{v:0{r.width}d}{r.gap}" for v, r in zip(at, self.ranges, strict=True)
            )
            i = len(at) - 1
            at[i] += self.ranges[i].step
            while at[i] > self.ranges[i].end:
                if i == 0:
                    return
                at[i] = self.ranges[i].start
                i -= 1
                at[i] += self.ranges[i].step


def _bad(style: str, text: str, example: str, field: str, why: str = "") -> DsortSpecError:
    why = f": {why}" if why else f" (expecting e.g. {example!r})"
    return DsortSpecError(f"invalid {style!r} template {text!r}{why}", field=field)


def parse_template(text: str, *, field: str = "output_format") -> Template:
    """Parses a template with the server's rules (``cmn/cos/template.go``).

    Supported: ``prefix-{0000..0999[..step]}-suffix`` (several ranges allowed; zero padding is
    the *shorter* of the two bounds), ``prefix-@00999`` (0..999, width 5) and ``prefix-%06d``
    (unbounded). Brace lists such as ``{a,b}`` are not AIStore templates.

    Args:
        text: the template.
        field: the spec key named in errors.

    Raises:
        DsortSpecError: the template is malformed.
    """
    if text in ("", "*"):
        return Template(text, "prefix", "", ())
    if "{" in text and "}" in text:
        return _parse_bash(text, field)
    if "@" in text:
        ranges, prefix = [], text[: text.index("@")]
        for part in text.split("@")[1:]:
            digits = re.match(r"[0-9]*", part).group()  # type: ignore[union-attr]
            if not digits:
                raise _bad("at", text, "prefix-@00100-suffix", field)
            ranges.append(_Range(0, int(digits), 1, len(digits), part[len(digits) :]))
        return Template(text, "at", prefix, tuple(ranges))
    if "%" in text:
        m = re.fullmatch(r"([^%]*)%(0[0-9]+)?d([^%]*)", text)
        if m is None:
            raise _bad("fmt", text, "prefix-%06d-suffix", field)
        width = int(m.group(2)[1:]) if m.group(2) else 0
        return Template(text, "fmt", m.group(1), (_Range(0, 2**63 - 2, 1, width, m.group(3)),))
    return Template(text, "prefix", text, ())


def _parse_bash(text: str, field: str) -> Template:
    example = "prefix-{0001..0010..1}-suffix"
    prefix, ranges, rest = text[: text.index("{")], [], text
    while "{" in rest:
        left, right = rest.index("{"), rest.find("}")
        if right < left:
            raise _bad("bash", text, example, field)
        inside = rest[left + 1 : right]
        if "," in inside and ".." not in inside:
            raise _bad(
                "bash",
                text,
                example,
                field,
                "brace lists like {a,b} are not supported "
                "by AIStore; list the shards in input_format.objnames instead",
            )
        parts = inside.split("..")
        if len(parts) not in (2, 3) or not all(re.fullmatch(r"[0-9]+", p) for p in parts):
            raise _bad("bash", text, example, field)
        start, end = int(parts[0]), int(parts[1])
        step = int(parts[2]) if len(parts) == 3 else 1
        if start > end:
            raise _bad("bash", text, "", field, "'start' cannot be greater than 'end'")
        if step <= 0:
            raise _bad("bash", text, "", field, "'step' is non-positive")
        rest = rest[right + 1 :]
        gap = rest[: rest.index("{")] if "{" in rest else rest
        if "}" in gap:
            raise _bad("bash", text, example, field)
        ranges.append(_Range(start, end, step, min(len(parts[0]), len(parts[1])), gap))
    return Template(text, "bash", prefix, tuple(ranges))


def expand_template(text: str) -> list[str]:
    """Expands a bounded template into names exactly as the dSort server does.

    Raises:
        DsortSpecError: malformed or unbounded template, or more names than
            ``WDS_CLOUD_MAX_URLS`` (default 1,000,000).
    """
    from wds_cloud.braces import ENV_MAX_URLS, max_urls

    tpl = parse_template(text, field="template")
    if not tpl.bounded:
        raise DsortSpecError(f"template {text!r} has no bounded range", field="template")
    limit = max_urls()
    if tpl.count > limit:
        raise DsortSpecError(
            f"template {text!r} expands to {tpl.count:,} names, more than the limit of "
            f"{limit:,} (set {ENV_MAX_URLS} to raise it)",
            field="template",
        )
    return list(tpl.names())
