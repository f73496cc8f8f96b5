"""The shape of ``wds_cloud/openers``: one ``translate_error`` signature per network backend.

A reader or writer gets what it needs from its opener as arguments, never by reaching into it.
The rules against import cycles and against private access across modules cover the whole
package: ``tests/test_structure.py``.
"""

from __future__ import annotations


def test_every_network_backend_has_an_errors_module_with_one_signature() -> None:
    """``translate_error(exc, /, *, url, offset=None, ...)``: further keywords have defaults."""
    import inspect

    from wds_cloud.openers.ais import errors as ais_errors
    from wds_cloud.openers.gcs import errors as gcs_errors
    from wds_cloud.openers.s3 import errors as s3_errors

    for module in (s3_errors, gcs_errors, ais_errors):
        params = list(inspect.signature(module.translate_error).parameters.values())
        assert [p.name for p in params[:3]] == ["exc", "url", "offset"], module.__name__
        assert params[0].kind is inspect.Parameter.POSITIONAL_ONLY
        assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in params[1:])
        assert params[1].default is inspect.Parameter.empty
        assert all(p.default is not inspect.Parameter.empty for p in params[2:])
