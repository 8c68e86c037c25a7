import pytest
import torch
from torch import nn

from torchdoctor import expect_shape, shape_table
from torchdoctor.shapes import ShapeMismatchError


def cnn(fc_in: int) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(1, 8, 3), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(fc_in, 10))


def test_table_of_output_shapes():
    table = shape_table(cnn(8 * 13 * 13), torch.randn(2, 1, 28, 28))
    assert table.ok and table.failed_layer is None
    assert [r.name for r in table.rows] == ["0", "1", "2", "3", "4"]
    assert table.rows[0].output_shape == "[2, 8, 26, 26]" and table.rows[-1].output_shape == "[2, 10]"
    assert table.rows[-1].params == 8 * 13 * 13 * 10 + 10
    assert "[2, 1352]" in str(table) and "| `4` | `Linear` |" in table._repr_markdown_()


def test_table_stops_at_the_failing_layer_and_names_it():
    table = shape_table(cnn(784), torch.randn(2, 1, 28, 28))
    assert not table.ok and table.failed_layer == "4 (Linear)"
    assert [r.output_shape for r in table.rows][-2:] == ["[2, 1352]", "FAILED"]
    text = str(table)
    assert "FAILED in 4 (Linear)" in text and "in_features=1352" in text


class ReshapesInForward(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3)
        self.fc = nn.Linear(4 * 26 * 26, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.conv(x).view(7, -1))


def test_failure_between_layers_names_the_parent_module():
    table = shape_table(ReshapesInForward(), torch.randn(2, 1, 28, 28))
    assert table.failed_layer == "ReshapesInForward (ReshapesInForward)"
    assert "invalid for input of size" in str(table.error)


def test_hooks_are_removed_and_bad_input_reported():
    model = cnn(784)
    shape_table(model, torch.randn(2, 1, 28, 28))
    assert all(not m._forward_hooks and not m._forward_pre_hooks for m in model.modules())
    with pytest.raises(TypeError, match="needs an nn.Module"):
        shape_table(lambda x: x, torch.ones(1))


def test_expect_shape():
    x = torch.zeros(8, 3, 32, 32)
    assert expect_shape(x, ("N", 3, None, None)) is x
    with pytest.raises(ShapeMismatchError, match=r"images: expected shape \(N, 1, \*, \*\), got \[8, 3, 32, 32\]: "
                                                 r"dimension 1 is 3, expected 1"):
        expect_shape(x, ("N", 1, None, None), name="images")
    with pytest.raises(ShapeMismatchError, match="expected 2 dimensions"):
        expect_shape(x, ("N", 10))
    with pytest.raises(ShapeMismatchError, match="'H' was 32"):
        expect_shape(torch.zeros(1, 32, 31), (1, "H", "H"))


def test_expect_shape_rejects_bad_arguments():
    with pytest.raises(TypeError, match="needs a tensor"):
        expect_shape([1, 2], ("N",))
    with pytest.raises(TypeError, match="sequence of ints, names or None"):
        expect_shape(torch.zeros(2, 3), "N3")
