"""Merging the states of several readers taken at the same step into one global state.

:func:`merge_states` (``wds_cloud.resume.merge_states``) takes the states of ranks, or of
DataLoader workers as torchdata's ``StatefulDataLoader`` saves them, and merges them by their
kind: plain ledgers (:mod:`wds_cloud.resume.state`), resampled draws
(:mod:`wds_cloud.resume.draws`), worker windows (:mod:`wds_cloud.resume.worker_windows`) or a
``RandomMix`` (:mod:`wds_cloud.resume.mixing`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from wds_cloud.errors import ConfigError
from wds_cloud.resume.state import STATE_FORMAT, check_state, index_ranges, merge_intervals


def _wds_states(state: Any) -> list[Any]:
    """The wds_cloud states in ``state``: itself, or those a torchdata ``StatefulDataLoader``
    state holds (its dataset's without workers, each worker's with workers)."""
    if not isinstance(state, dict) or state.get("format") == STATE_FORMAT:
        return [state]
    snapshot = state.get("_snapshot")
    if isinstance(snapshot, dict) and isinstance(snapshot.get("_worker_snapshots"), dict):
        late = state.get("_steps_since_snapshot")
        if late:
            raise ConfigError(
                f"merge_states: this StatefulDataLoader state was taken {late} batch(es) after "
                "its workers' last snapshot, so it does not say what those batches delivered; "
                "take loader states after a multiple of snapshot_every_n_steps batches (the "
                "default, 1, makes every step one)"
            )
        return [w.get("dataset_state") for w in snapshot["_worker_snapshots"].values()]
    if "dataset_state" in state and "_num_yielded" in state:
        return [state["dataset_state"]]
    return [state]


def merge_states(states: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Merge the states of several readers (taken at the same step) into one global state.

    Under ``torch.distributed`` ``state_dict()`` gathers and merges by itself; use this when
    each rank saved its own state (e.g. ranks started with ``RANK``/``WORLD_SIZE`` only), or to
    turn torchdata ``StatefulDataLoader`` states (``loader.state_dict()`` of each rank, which
    hold one state per worker) into a state that any world size and worker count can resume.

    Raises:
        ConfigError: the states are of different epochs or shard orders, or a
            ``StatefulDataLoader`` state was taken between its workers' snapshots.
    """
    states = [check_state(s) for state in states for s in _wds_states(state)]
    if not states:
        raise ConfigError("merge_states: no states")
    if any("mixers" in s for s in states):
        return merge_mixes(states)  # RandomMix states: mixers keyed by rank and worker
    if any("windows" in s for s in states):
        return merge_windows(states)  # worker windows: keyed by rank and worker
    if any(s.get("resampled") for s in states):
        return merge_draws(states)  # resampled readers: their draws, keyed by rank and worker
    first = states[0]
    for other in states[1:]:
        for key in ("epoch", "seed", "order", "shards"):
            if other.get(key) != first.get(key):
                raise ConfigError(
                    f"merge_states: states differ in {key!r} ({first.get(key)!r} vs "
                    f"{other.get(key)!r}); save them at the same step of the same epoch"
                )
    done: set[int] = set()
    ivs: dict[str, list[list[int]]] = {}
    ends: dict[str, int] = {}
    for s in states:
        for i0, i1 in s.get("done", []):
            done.update(range(i0, i1))
        for url, flat in s.get("open", {}).items():
            ivs.setdefault(url, []).extend([flat[i], flat[i + 1]] for i in range(0, len(flat), 2))
        ends.update(s.get("ends", {}))
    merged = dict(first)
    merged.pop("reader", None)
    merged.pop("finished", None)
    if all(s.get("finished") for s in states):
        merged["finished"] = True  # every reader finished its share: the epoch is over
    merged["delivered"] = sum(int(s.get("delivered", 0)) for s in states)
    merged["generation"] = max(int(s.get("generation", 0)) for s in states)
    merged["done"] = index_ranges(done)
    merged["open"] = {url: [x for iv in merge_intervals(v) for x in iv] for url, v in ivs.items()}
    merged["ends"] = ends
    return merged


def merge_draws(states: list[dict[str, Any]]) -> dict[str, Any]:
    """Merge the resampled states of several ranks taken at the same step (their readers'
    draws are disjoint: each is keyed by rank and worker).

    Raises:
        ConfigError: the states are of different epochs or seeds, or not all resampled.
    """
    first = states[0]
    for other in states[1:]:
        for key in ("resampled", "epoch", "seed"):
            if other.get(key) != first.get(key):
                raise ConfigError(
                    f"merge_draws: states differ in {key!r} ({first.get(key)!r} vs "
                    f"{other.get(key)!r}); save them at the same step of the same run"
                )
    merged = {k: v for k, v in first.items() if k != "reader"}
    merged["delivered"] = sum(int(s.get("delivered", 0)) for s in states)
    merged["generation"] = max(int(s.get("generation", 0)) for s in states)
    merged["draws"] = dict(sorted((r, d) for s in states for r, d in s["draws"].items()))
    return merged


def merge_windows(states: list[dict[str, Any]]) -> dict[str, Any]:
    """Merge the loader states of several ranks with per-worker windows (their readers are
    disjoint: keyed by rank and worker).

    Raises:
        ConfigError: not all states are of worker windows.
    """
    if not all("windows" in s for s in states):
        raise ConfigError("merge_states: worker-window states mixed with other states")
    merged = dict(states[0])
    windows: dict[str, Any] = {}
    for s in states:  # after an elastic resume every rank holds every old reader's entry:
        for r, d in s["windows"].items():  # the one that took it over has the most
            old = windows.get(r)
            if old is None or _progress(d) > _progress(old):
                windows[r] = d
    merged["windows"] = dict(sorted(windows.items()))
    merged["delivered"] = sum(_progress(d)[1] for d in windows.values())
    merged["generation"] = max(int(s.get("generation", 0)) for s in states)
    merged.pop("finished", None)
    if all(s.get("finished") for s in states):
        merged["finished"] = True
    return merged


def merge_mixes(states: list[dict[str, Any]]) -> dict[str, Any]:
    """Merge the RandomMix states of several ranks taken at the same step (mixers are keyed by
    rank and worker; datasets' ledgers are merged)."""
    states = [check_state(s) for s in states]
    if not all("mixers" in s for s in states):
        raise ConfigError("merge_states: RandomMix states mixed with other states")
    merged = dict(states[0])
    merged.pop("reader", None)
    scopes = [s["reader"] for s in states if s.get("reader") is not None]
    if scopes:  # per-worker states (StatefulDataLoader): the mixers are the workers
        merged["readers"] = [scopes[0][1], scopes[0][3]]
    datasets = []
    for i in range(len(merged["datasets"])):
        sub = {}
        for part in ("delivered", "pulled"):
            parts = [dict(s["datasets"][i][part], format=STATE_FORMAT) for s in states]
            m = merge_states(parts)
            m.pop("format", None)
            sub[part] = m
        datasets.append(sub)
    merged["datasets"] = datasets
    merged["mixers"] = dict(sorted((r, d) for s in states for r, d in s["mixers"].items()))
    merged["delivered"] = sum(int(s.get("delivered", 0)) for s in states)
    merged["generation"] = max(int(s.get("generation", 0)) for s in states)
    merged.pop("finished", None)
    if all(s.get("finished") for s in states):
        merged["finished"] = True
    return merged


def _progress(d: dict[str, Any]) -> tuple[int, int]:
    return int(d.get("window", 0)), sum(int(p.get("delivered", 0)) for p in d.get("passes", []))
