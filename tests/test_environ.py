"""``isolated_environ`` (``tests/conftest.py``): a variable a test sets, changes or removes is as
before once the test is over, in a session of two tests run here (so the order is known)."""

from __future__ import annotations

import os

import pytest

TESTS = """
import os

def test_sets_changes_and_removes(monkeypatch):
    os.environ["WDS_TEST_SET_HERE"] = "leaked?"
    os.environ["WDS_TEST_CHANGED"] = "changed"
    del os.environ["WDS_TEST_REMOVED"]
    monkeypatch.setenv("WDS_TEST_BY_MONKEYPATCH", "1")
    assert os.environ["WDS_TEST_SET_HERE"] == "leaked?"

def test_next_sees_the_environment_as_before():
    assert "WDS_TEST_SET_HERE" not in os.environ
    assert "WDS_TEST_BY_MONKEYPATCH" not in os.environ
    assert os.environ["WDS_TEST_CHANGED"] == "before"
    assert os.environ["WDS_TEST_REMOVED"] == "before"
"""


def test_a_variable_set_in_one_test_is_gone_in_the_next(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WDS_TEST_CHANGED", "before")
    monkeypatch.setenv("WDS_TEST_REMOVED", "before")
    pytester.makeconftest("from tests.conftest import isolated_environ  # noqa: F401\n")
    pytester.makepyfile(test_two=TESTS)
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)
    assert "WDS_TEST_SET_HERE" not in os.environ  # nor left to this session


def test_without_the_fixture_the_variable_leaks(pytester: pytest.Pytester) -> None:
    """The session above is one that can fail: the same two tests with no fixture."""
    os.environ["WDS_TEST_CHANGED"] = os.environ["WDS_TEST_REMOVED"] = "before"
    pytester.makepyfile(test_two=TESTS)
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=1)
