"""train-head --from-head: a warm start from a trained head's weights (issue 50: a long run
resumes from its checkpoint where the machine kept it, else starts from the last committed
head). The run takes the head's layers and draft vocabulary, starts from its weights (a
lower loss than a new head's on the same first batch), and refuses a head that does not fit."""

from __future__ import annotations

import json

import pytest
from safetensors.torch import load_file

from specviz.cli.main import main
from specviz.core.models.builtin import resources_dir
from tests.train_head_data import FAST, write_text

TINY_HEAD = resources_dir() / "models" / "tiny" / "eagle3"
ARGS = [*FAST, "--tokens", "256", "--log-every", "1", "--eval-every", "100", "--no-check"]


def _train(tmp_path, name: str, *extra: str) -> dict:
    text = write_text(tmp_path / "text.txt")
    out = tmp_path / name
    assert main(["train-head", "--target", "builtin:tiny", "--data", str(text), "--out",
                 str(out), *ARGS, *extra]) == 0  # fmt: skip
    return json.loads((out / "training.json").read_text())


def test_a_warm_start_takes_the_heads_weights_layers_and_vocabulary(tmp_path):
    shipped = json.loads((TINY_HEAD / "config.json").read_text())
    fresh = _train(tmp_path, "fresh")
    warm = _train(tmp_path, "warm", "--from-head", str(TINY_HEAD))
    assert warm["layers"] == shipped["eagle_aux_hidden_state_layer_ids"] != fresh["layers"]
    assert warm["draft_vocab"] == shipped["draft_vocab_size"] != fresh["draft_vocab"]
    assert warm["config"]["from_head"] == str(TINY_HEAD)
    # its curve begins with the head as it came: measured before the first step
    assert warm["curve"][0]["step"] == 0 and warm["curve"][0]["loss"] is None
    assert fresh["curve"][0]["step"] > 0
    assert warm["curve"][0]["mat_k4"] > fresh["curve"][-1]["mat_k4"]
    # the same first batch (same data, seed and order): the trained head fits it far better
    assert warm["losses"][0]["loss"] < 0.5 * fresh["losses"][0]["loss"], (warm, fresh)
    assert f"warm-started from {TINY_HEAD}" in (tmp_path / "warm" / "README.md").read_text()
    d2t = load_file(tmp_path / "warm" / "model.safetensors")["d2t"]
    assert d2t.equal(load_file(TINY_HEAD / "model.safetensors")["d2t"])


@pytest.mark.parametrize("extra,says", [
    (["--layers", "1,3,5"], "reads layers [1, 3, 4], not --layers [1, 3, 5]"),
    (["--draft-vocab", "1024"], "not --draft-vocab 1024"),
])  # fmt: skip
def test_a_head_that_does_not_fit_is_one_line_and_exit_2(tmp_path, capsys, extra, says):
    text = write_text(tmp_path / "text.txt")
    out = tmp_path / "out"
    code = main(["train-head", "--target", "builtin:tiny", "--data", str(text), "--out",
                 str(out), *ARGS, "--from-head", str(TINY_HEAD), *extra])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2 and says in err, err
    assert not out.exists() or not any(out.iterdir())
