import random

import numpy as np
import pytest
import torch

from torchdoctor import pick_device, seed_everything


def test_auto_and_explicit_choices():
    expected = "cuda" if torch.cuda.is_available() else ("mps" if torch.backends.mps.is_available() else "cpu")
    assert pick_device().type == expected
    assert pick_device("auto").type == expected
    assert pick_device("cpu") == torch.device("cpu")
    assert pick_device(" CPU ") == torch.device("cpu")
    assert pick_device(torch.device("cpu")) == torch.device("cpu")


def test_bad_choices_say_what_to_do():
    with pytest.raises(ValueError, match="use 'auto', 'cpu'"):
        pick_device("gpu")
    with pytest.raises(ValueError, match="unsupported device"):
        pick_device("meta")


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error on a machine without a GPU")
def test_unavailable_cuda_is_a_clear_error():
    with pytest.raises(RuntimeError, match="Use 'auto' or 'cpu'"):
        pick_device("cuda")


@pytest.mark.skipif(torch.backends.mps.is_available(), reason="checks the error on a machine without MPS")
def test_unavailable_mps_is_a_clear_error():
    with pytest.raises(RuntimeError, match="MPS"):
        pick_device("mps")


def test_seed_everything_repeats_all_generators():
    def draw():
        return random.random(), np.random.rand(), torch.rand(1).item()

    seed_everything(123)
    first = draw()
    seed_everything(123)
    assert draw() == first
    with pytest.raises(TypeError, match="seed must be an int"):
        seed_everything("1")
