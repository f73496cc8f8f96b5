"""Where a loader's time goes: per-stage timing, a trace, a table and a one-line verdict.

Off by default. Switched on by ``WebDataset(...).profile()``, ``WebLoader(...).profile()``,
``make_loader(..., profile=True)`` or ``WDS_CLOUD_PROFILE=1``; read with
``loader.profile_report()`` and ``loader.export_trace(path)`` (``docs/observability.md``).

Modules: :mod:`.profile` (the per-process :class:`~.profile.Recorder` and its sampler),
:mod:`.passes` (how a pipeline's pass is put under it), :mod:`.stream` (the timed shard stream), :mod:`.report` (:class:`~.report.ProfileReport`, the
plain dataclass a table, a verdict and an autotuner read), :mod:`.trace` (Chrome/Perfetto
trace-event JSON), :mod:`.verdict`, :mod:`.plot` (matplotlib, the ``[plot]`` extra). This
package imports only the foundation, so every layer above may record into it.
"""
