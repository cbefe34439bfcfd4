"""A model file may import its neighbours inside its functions, not only at
the top: the loader keeps the file's folder importable for the whole command."""

from cli_harness import espnn

HELPER = '''
import torch
from torch import nn


class Tiny(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 4)

    def forward(self, x):
        return torch.relu(self.fc(x))
'''

MODEL = '''
import torch


def model():
    from espnn_test_neighbour_helper import Tiny  # imported when the function runs

    torch.manual_seed(0)
    return Tiny().eval(), (torch.randn(1, 8),)


def data():
    from espnn_test_neighbour_helper import Tiny  # noqa: F401 - the data function imports it too

    return [torch.randn(1, 8) for _ in range(4)]
'''


def test_an_import_inside_the_model_function_finds_the_neighbour(tmp_path):
    (tmp_path / "espnn_test_neighbour_helper.py").write_text(HELPER)
    (tmp_path / "model.py").write_text(MODEL)
    r = espnn("compile", tmp_path / "model.py:model", "--calibration", f"{tmp_path / 'model.py'}:data",
              "-o", tmp_path / "out" / "m.pte")
    assert r.code == 0, r
    assert (tmp_path / "out" / "m.pte").stat().st_size > 0
