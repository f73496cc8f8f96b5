"""How a stage's outputs stand for its inputs: the kind a stage declares for resume tracking.

A resumable pipeline (``docs/resume.md``) knows which source samples every item stands for.
Each stage says how its outputs relate to its inputs, where it is defined::

    @stage_kind("batch", lazy=True)
    def _batched(data, batchsize=20, ...): ...

    batched = pipelinefilter(_batched)

The kinds (:data:`KINDS`):

- ``stream``: an output stands for every input pulled since the previous output (a map, a
  filter, a decoder; a stage yielding several items per input ties the input to the first);
- ``batch``: an output is a group of the inputs pulled since the previous output, one row per
  input, in order (``batched``, ``listed``);
- ``unbatch``: the outputs are the rows of each input, in order (``unbatched``, ``unlisted``);
- ``identity``: an output is one of the inputs, the same object, maybe later (a buffer
  shuffle);
- ``passthrough``: the outputs are the inputs, unchanged and in order, and the stage never looks
  at them (``check_empty``): it can run on anything, the tracked pairs included;
- ``regroup``: an output is made from inputs the stage held in a buffer, in any order (``pack``,
  ``group_by``); the stage says which: it is an object with ``regroup(src)`` yielding one
  :class:`Group` per output (:class:`Regrouping`).

``lazy=True`` adds that the stage yields what it pulled before it pulls more, so it holds
nothing while its output is in use (a map, a selection, ``batched``: not a shuffle, not
``unbatched``); a ``with_epoch`` window or a ``RandomMix`` may sit under such stages only.

The declaration is the attribute :data:`ATTRIBUTE` of the generator function (or of the class
whose instances are stages, through their ``run``); :func:`declared_kind` reads it from a stage
as a pipeline holds it (a curried :class:`~wds_cloud.core.curry.FilterFunction`, a
``functools.partial``, a function or an object). A stage without a declaration is tracked as
``docs/resume.md`` says under "Stages of your own".
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple, Protocol, TypeVar, get_args

from wds_cloud.core.curry import FilterFunction
from wds_cloud.errors import ConfigError

Kind = Literal["stream", "batch", "unbatch", "identity", "passthrough", "regroup"]

#: Every kind, in the order of the module docstring.
KINDS: tuple[str, ...] = get_args(Kind)

#: The attribute holding a :class:`StageKind` on a declared function or class.
ATTRIBUTE = "wds_stage_kind"

T = TypeVar("T")


@dataclass(frozen=True)
class StageKind:
    """What a stage declared: its kind and whether it is lazy (see the module docstring)."""

    kind: Kind
    lazy: bool = False


class Group(NamedTuple):
    """One output of a ``regroup`` stage and the inputs it stands for.

    Inputs are named by their arrival index: the count of inputs the stage pulled from its
    source before them in this ``regroup()`` call (the first is 0).
    """

    item: Any  # the output
    members: list[int]  # the inputs it was made from, one per row when ``rows``
    dropped: list[int]  # inputs consumed since the previous output without one of their own
    rows: bool  # the output has one row per member, in order (a list or a collated batch)


class Regrouping(Protocol):
    """A ``regroup`` stage: ``run(src)`` yields the outputs, ``regroup(src)`` the same outputs
    as :class:`Group` records (resume's tracker calls it)."""

    def run(self, src: Any) -> Any: ...

    def regroup(self, src: Any) -> Any: ...


def stage_kind(kind: Kind, *, lazy: bool = False) -> Callable[[T], T]:
    """Declare the tracking kind of a stage: a decorator for its generator function, or for
    the class whose instances are stages.

    Args:
        kind: ``stream``, ``batch``, ``unbatch``, ``identity``, ``passthrough`` or ``regroup``.
        lazy: the stage yields what it pulled before it pulls more.

    Returns:
        A decorator that sets :data:`ATTRIBUTE` and returns what it decorates.

    Raises:
        ConfigError: an unknown kind, or ``lazy`` with a kind that holds items.
    """
    if kind not in KINDS:
        raise ConfigError(f"stage_kind: unknown kind {kind!r}; the kinds are {', '.join(KINDS)}")
    if lazy and kind not in ("stream", "batch"):
        raise ConfigError(
            f"stage_kind: a {kind!r} stage cannot be lazy (only stream and batch stages yield "
            "what they pulled before pulling more)"
        )
    declared = StageKind(kind, lazy)

    def declare(target: T) -> T:
        if kind == "regroup" and not callable(getattr(target, "regroup", None)):
            raise ConfigError(
                f"stage_kind: a 'regroup' stage must be a class with regroup(src) yielding "
                f"Group records; {getattr(target, '__qualname__', target)!r} has none"
            )
        setattr(target, ATTRIBUTE, declared)
        return target

    return declare


def stage_function(stage: Any) -> Any:
    """The function or object that carries the declaration of ``stage``: the generator of a
    curried stage or of a ``functools.partial``, else ``stage`` itself."""
    if isinstance(stage, FilterFunction):
        return stage.f
    if isinstance(stage, functools.partial):
        return stage.func
    return stage


def declared_kind(stage: Any) -> StageKind | None:
    """The kind ``stage`` (as a pipeline holds it) declares, or None."""
    found = getattr(stage_function(stage), ATTRIBUTE, None)
    return found if isinstance(found, StageKind) else None


def stage_name(stage: Any) -> str:
    """A short name of ``stage`` for messages: its function's qualified name, else its class's."""
    target = stage_function(stage)
    name = getattr(target, "__qualname__", None)
    return name if isinstance(name, str) else type(target).__qualname__
