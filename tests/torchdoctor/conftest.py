"""Shared fixtures of the torchdoctor tests."""

from collections.abc import Callable

import pytest


@pytest.fixture
def raised() -> Callable[[Callable[[], object]], BaseException]:
    """``raised(fn)``: the exception ``fn()`` raises, for real; the test fails when it raises nothing."""

    def run(fn: Callable[[], object]) -> BaseException:
        try:
            fn()
        except BaseException as exc:
            return exc
        raise AssertionError("did not raise")

    return run
