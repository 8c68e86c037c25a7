"""The ``cuda`` marker: a test that needs a CUDA GPU is marked ``@pytest.mark.cuda`` and skips elsewhere with the one
reason "needs a CUDA GPU". ``make test-gpu`` and the workflow's gpu job select them all with ``-m cuda`` and fail when
one skipped (course_tools/gpu_check.py)."""

import pytest


def pytest_collection_modifyitems(config, items):
    marked = [item for item in items if item.get_closest_marker("cuda")]
    if not marked:
        return
    import torch

    if not torch.cuda.is_available():
        for item in marked:
            item.add_marker(pytest.mark.skip(reason="needs a CUDA GPU"))
