"""Heads in SGLang's layout (SpecForge's export, `train-head --format sglang`): `midlayer.*`
weights and a Llama config whose aux layer ids sit in `eagle_config`, one less than
transformers' (SGLang captures id + 1). check-head and `--drafter eagle3 --head DIR` read
them on the layers they were trained for."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file

from specviz.core.drafters.eagle3.format import HeadError, build_head, read_config


@pytest.fixture(scope="module")
def heads(tmp_path_factory):
    """(speculators folder, SGLang folder, tiny's config) of one random head for tiny."""
    from transformers import AutoConfig

    from specviz.core.models.builtin import get_pair
    from specviz.core.training.export import head_config, new_head, write_sglang, write_speculators

    target = AutoConfig.from_pretrained(get_pair("builtin:tiny").resolve()[0])
    torch.manual_seed(0)
    vocab = target.vocab_size
    lm_rows = torch.randn(vocab, target.hidden_size)
    head = new_head(head_config(target, (1, 3, 5), 512, 3), lm_rows, list(range(0, 1024, 2)))
    root = tmp_path_factory.mktemp("heads")
    ours, sglang = root / "speculators", root / "sglang"
    ours.mkdir()
    sglang.mkdir()
    write_speculators(head, ours, "builtin:tiny", ["GPT2LMHeadModel"])
    write_sglang(head, sglang)
    return ours, sglang, target


def test_the_sglang_layout_is_read_on_the_layers_it_was_trained_for(heads):
    ours, sglang, target = heads
    raw = json.loads((sglang / "config.json").read_text())
    assert raw["eagle_config"]["eagle_aux_hidden_state_layer_ids"] == [0, 2, 4]
    assert "midlayer.self_attn.q_proj.weight" in load_file(str(sglang / "model.safetensors"))
    config, layout, notes = read_config(sglang, target.n_layer)
    assert layout == "sglang" and config.aux_layers == (1, 3, 5)
    assert config.draft_vocab == 512 and any("read as [1, 3, 5]" in n for n in notes)
    shape = (target.n_layer, target.hidden_size, target.vocab_size)
    theirs, _, _ = build_head(sglang, *shape)
    mine, _, _ = build_head(ours, *shape)
    for key, tensor in mine.state_dict().items():
        assert torch.equal(theirs.state_dict()[key], tensor), key


def test_bad_sglang_layer_ids_are_one_line(heads, tmp_path):
    _, sglang, target = heads
    bad = tmp_path / "bad"
    bad.mkdir()
    raw = json.loads((sglang / "config.json").read_text())
    raw["eagle_config"]["eagle_aux_hidden_state_layer_ids"] = [0, 2, 5]  # 6 is past 6 layers
    (bad / "config.json").write_text(json.dumps(raw))
    with pytest.raises(HeadError, match=r"aux layers \[6\] are outside"):
        read_config(bad, target.n_layer)
    raw["eagle_config"]["eagle_aux_hidden_state_layer_ids"] = "0,2,4"
    (bad / "config.json").write_text(json.dumps(raw))
    with pytest.raises(HeadError, match="must be a list of layer numbers"):
        read_config(bad, target.n_layer)


def test_check_head_and_a_session_load_an_sglang_head(heads, tmp_path, capsys):
    from specviz.cli.main import main

    _, sglang, _ = heads
    code = main(["check-head", str(sglang), "--target", "builtin:tiny", "--steps", "2",
                 "--tokens", "8", "--json"])  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0
    assert json.loads(out)["layers"] == [1, 3, 5]
    trace = tmp_path / "run.jsonl"
    code = main(["run", "--target", "builtin:tiny", "--drafter", "eagle3", "--head", str(sglang),
                 "--prompt", "Why is the sky blue?", "--max-new-tokens", "8",
                 "--temperature", "0", "--trace", str(trace)])  # fmt: skip
    assert code == 0, capsys.readouterr().err
    rounds = [json.loads(x) for x in trace.read_text().splitlines()[1:]]
    assert sum(r.get("n_drafted", 0) for r in rounds if r.get("type") == "round") > 0
