"""The entries chapter 05 (checkpoints) added, and the specific fixes of its entries, on the real exceptions.
(test_catalog.py already raises every reproducer.)"""

import io
import os

import pytest
import torch
from torch import nn

from torchdoctor import explain
from torchdoctor.catalog import get_entry


def _raised(fn):
    with pytest.raises(Exception) as info:
        fn()
    return info.value


def test_an_html_page_is_not_a_checkpoint_whatever_weights_only_says(tmp_path):
    page = tmp_path / "model.pt"
    page.write_text("<!DOCTYPE html><html><body>404</body></html>")
    for weights_only in (True, False):
        err = _raised(lambda weights_only=weights_only: torch.load(page, weights_only=weights_only))
        diagnosis = explain(err)
        assert diagnosis is not None and diagnosis.id == "not-a-checkpoint", str(err)
        assert "'<'" in diagnosis.fix and "HTML" in diagnosis.fix
    # a genuine weights_only refusal is still a weights_only refusal
    buffer = io.BytesIO()
    torch.save(nn.Linear(2, 2), buffer)
    buffer.seek(0)
    assert explain(_raised(lambda: torch.load(buffer))).id == "weights-only-load"


def test_a_text_file_names_its_first_character(tmp_path):
    text = tmp_path / "weights.pt"
    text.write_text("version 1\n")
    diagnosis = explain(_raised(lambda: torch.load(text, weights_only=False)))
    assert diagnosis.id == "not-a-checkpoint" and "'v'" in diagnosis.fix and "HTML" not in diagnosis.fix


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without a GPU")
def test_gpu_checkpoint_on_cpu_gets_map_location():
    diagnosis = explain(_raised(get_entry("cuda-checkpoint-on-cpu").reproducer))
    assert diagnosis.id == "cuda-checkpoint-on-cpu" and "map_location='cpu'" in diagnosis.fix


def test_gpu_checkpoint_from_another_gpu_index_names_it():
    message = ("RuntimeError: Attempting to deserialize object on CUDA device 1 but torch.cuda.device_count() is 1. "
               "Please use torch.load with map_location to map your storages to an existing device.")
    diagnosis = explain(message)
    assert diagnosis.id == "cuda-checkpoint-on-cpu"
    assert "cuda:1" in diagnosis.fix and "1 GPU(s)" in diagnosis.fix


def test_state_dict_keys_with_module_prefix_says_strip_it():
    wrapped = nn.DataParallel(nn.Linear(3, 2))  # on a machine without GPUs it only wraps: keys get 'module.'
    err = _raised(lambda: nn.Linear(3, 2).load_state_dict(wrapped.state_dict()))
    diagnosis = explain(err)
    assert diagnosis.id == "state-dict-keys" and "module." in diagnosis.fix and "removeprefix" in diagnosis.fix


def test_a_wrapped_model_given_a_plain_checkpoint_is_told_to_load_into_module():
    wrapped = nn.DataParallel(nn.Linear(3, 2))  # the other way round: the model has the prefix, the file not
    diagnosis = explain(_raised(lambda: wrapped.load_state_dict(nn.Linear(3, 2).state_dict())))
    assert diagnosis.id == "state-dict-keys" and "model.module.load_state_dict" in diagnosis.fix
    assert "saved from a DataParallel" not in diagnosis.fix
    wrapped.module.load_state_dict(nn.Linear(3, 2).state_dict())  # the fix it gives works


def test_grown_model_keys_get_the_general_fix():
    diagnosis = explain(_raised(get_entry("state-dict-keys").reproducer))
    assert diagnosis.id == "state-dict-keys" and "strict=False" in diagnosis.fix and "module." not in diagnosis.fix


def test_size_mismatch_names_the_tensor_and_both_shapes():
    err = _raised(get_entry("state-dict-size-mismatch").reproducer)
    diagnosis = explain(err)
    assert diagnosis.id == "state-dict-size-mismatch"
    assert diagnosis.fix.startswith("fc.weight is torch.Size([10, 20]) in the checkpoint but torch.Size([5, 20])")


def test_reproducers_leave_no_files_behind(tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)
    for entry_id in ("not-a-checkpoint", "ran-out-of-input"):
        _raised(get_entry(entry_id).reproducer)
    assert os.listdir(tmp_path) == []


def test_a_save_interrupted_halfway_is_a_corrupted_checkpoint(tmp_path):
    """Chapter 5: a plain torch.save stopped by KeyboardInterrupt leaves an archive without data.pkl."""

    class StopsTheSave:
        def __reduce__(self):
            raise KeyboardInterrupt("the save was interrupted")

    path = tmp_path / "plain.pt"
    torch.save({"w": torch.ones(2)}, path)
    with pytest.raises(KeyboardInterrupt):
        torch.save({"w": torch.ones(2), "stop": StopsTheSave()}, path)
    with pytest.raises(RuntimeError) as info:
        torch.load(path)
    assert "failed locating file data.pkl" in str(info.value)
    assert explain(info.value).id == "corrupted-checkpoint"


def test_a_truncated_archive_says_it_is_likely_corrupted(tmp_path):
    """Chapter 5 quotes the second half of the message of 2.14: keep it true."""
    path = tmp_path / "cut.pt"
    torch.save({"w": torch.ones(64, 64)}, path)
    path.write_bytes(path.read_bytes()[:1000])
    with pytest.raises(RuntimeError) as info:
        torch.load(path)
    assert "high likelihood that your checkpoint file is corrupted" in str(info.value)
    assert explain(info.value).id == "corrupted-checkpoint"
