"""Catalog entries of chapters 06 (data loading) and 08 (accuracy), checked on the errors PyTorch and Pillow really
raise in the variants the chapters show, beyond the one message each reproducer raises."""

import io
import pickle
import traceback

import numpy as np
import pytest
import torch
from PIL import Image
from torch.utils.data import DataLoader, Dataset, default_collate

from torchdoctor import explain
from torchdoctor.catalog.data_loading import _first_batch

# Module level, so that its pickling fails for being a lambda (as in a notebook), not for being local.
to_list = lambda batch: batch  # noqa: E731


@pytest.mark.parametrize("batch, wording", [
    ([(torch.zeros(2), 0), None], "has no len()"),           # samples are tuples, the None is not first
    ([None, (torch.zeros(2), 0)], "found <class 'NoneType'>"),  # the None comes first
    ([torch.zeros(2), None], "but got NoneType"),           # samples are bare tensors
], ids=["tuple-samples", "none-first", "tensor-samples"])
def test_every_wording_of_a_none_sample_is_collate_none(batch, wording, raised):
    exc = raised(lambda: default_collate(batch))
    assert type(exc) is TypeError and wording in str(exc)
    assert explain(exc).id == "collate-none"


def test_pil_images_without_a_transform_get_the_to_tensor_advice(raised):
    exc = raised(lambda: default_collate([Image.new("RGB", (4, 4)), Image.new("RGB", (4, 4))]))
    diagnosis = explain(exc)
    assert diagnosis.id == "collate-unsupported-type" and "PILToTensor" in diagnosis.fix


def test_numpy_strings_are_an_unsupported_type_not_a_none(raised):
    exc = raised(lambda: default_collate([np.array(["a"]), np.array(["b"])]))
    assert explain(exc).id == "collate-unsupported-type"


def test_mixed_tensor_and_array_batch_is_collate_mixed_types(raised):
    exc = raised(lambda: default_collate([torch.zeros(2), np.zeros(2, dtype=np.float32)]))
    diagnosis = explain(exc)
    assert diagnosis.id == "collate-mixed-types" and diagnosis.details["got"] == "numpy.ndarray"


def test_an_empty_image_file_names_the_file(tmp_path, raised):
    path = tmp_path / "0007.png"
    path.write_bytes(b"")
    exc = raised(lambda: Image.open(path))
    diagnosis = explain(exc)
    assert diagnosis.id == "image-unidentified" and "0007.png" in diagnosis.details["path"]


def test_a_truncated_png_read_from_disk_is_image_file_truncated(tmp_path, raised):
    path = tmp_path / "cut.png"
    buffer = io.BytesIO()
    Image.effect_noise((24, 24), 64).convert("RGB").save(buffer, format="PNG")
    path.write_bytes(buffer.getvalue()[: len(buffer.getvalue()) // 2])
    with Image.open(path) as image:  # lazy: opening works, decoding fails
        exc = raised(lambda: image.convert("RGB"))
    assert explain(exc).id == "image-file-truncated"


class _TruncatedPngDataset(Dataset):
    def __len__(self):
        return 2

    def __getitem__(self, i):
        buffer = io.BytesIO()
        Image.effect_noise((24, 24), 64).save(buffer, format="PNG")
        return Image.open(io.BytesIO(buffer.getvalue()[:200])).convert("RGB")


def test_a_pasted_worker_traceback_quoting_a_chained_error_is_a_worker_exception(raised):
    """Pillow raises its OSError 'from' another error, so the worker's message quotes a chain; the quoted error
    must not win over the DataLoader's own message when the traceback is pasted as text."""
    exc = raised(lambda: _first_batch(DataLoader(_TruncatedPngDataset(), batch_size=2, num_workers=1)))
    assert "The above exception was the direct cause" in str(exc)
    assert explain(exc).id == "worker-exception"
    for text in (f"{type(exc).__name__}: {exc}", "".join(traceback.format_exception(exc))):
        assert explain(text).id == "worker-exception"
    # the same error without workers is the Pillow error itself
    assert explain(raised(lambda: _TruncatedPngDataset()[0])).id == "image-file-truncated"


def test_a_lambda_defined_at_module_level_cannot_go_to_spawned_workers(raised):
    loader = DataLoader(range(4), batch_size=2, num_workers=1, collate_fn=to_list, multiprocessing_context="spawn")
    with pytest.warns(UserWarning, match="Got pickle error"):
        exc = raised(lambda: _first_batch(loader))
    assert type(exc) is pickle.PicklingError and "attribute lookup <lambda>" in str(exc)
    assert explain(exc).id == "cant-pickle-local"


def test_a_class_missing_from_main_in_the_worker_is_explained(raised):
    """What a spawned worker prints when the Dataset was defined in a notebook (the class is looked up in the
    worker's own __main__)."""
    exc = raised(lambda: pickle.loads(b"c__main__\nNotebookDataset\n."))
    # the module is whatever runs as __main__: '__main__' in a worker, 'pytest.__main__' under `python -m pytest`
    assert type(exc) is AttributeError and "Can't get attribute 'NotebookDataset' on <module '" in str(exc)
    assert explain(exc).id == "missing-class-on-load"
    assert "spawned DataLoader worker" in explain(exc).cause


def test_a_dead_worker_mentions_shared_memory_and_notebook_classes():
    from torchdoctor import get_entry

    entry = get_entry("worker-killed")
    assert "/dev/shm" in entry.cause and "__main__" in entry.cause
    assert "--shm-size" in entry.fix and "num_workers=0" in entry.fix


@pytest.mark.parametrize("message, expected", [
    ("RuntimeError: DataLoader worker (pid 4242) is killed by signal: Bus error. It is possible that dataloader's "
     "workers are out of shared memory. Please try to raise your shared memory limit.", "worker-killed"),
    ("RuntimeError: DataLoader worker (pid(s) 4242) exited unexpectedly", "worker-killed"),
    ("EOFError: Ran out of input", "ran-out-of-input"),
    ("RuntimeError: all elements of input should be between 0 and 1", "bce-input-range"),
])
def test_messages_the_chapters_quote(message, expected):
    assert explain(message).id == expected
