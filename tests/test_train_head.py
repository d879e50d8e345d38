"""`specviz train-head` on builtin:tiny: a few steps from a text file give a head that
loads and drafts, a training.json with the held-out acceptance curve, SGLang's layout and a
model card; bad input is one line, exit 2 and nothing written."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file

from specviz.cli.main import main
from tests.train_head_data import FAST, write_text

ARGS = [*FAST, "--epochs", "1", "--eval-every", "3", "--save-every", "3", "--format", "sglang"]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """(out folder, its stderr) of one short run."""
    root = tmp_path_factory.mktemp("train")
    text = write_text(root / "text.txt")
    out = root / "head"
    code = main(["train-head", "--target", "builtin:tiny", "--data", str(text), "--out",
                 str(out), *ARGS])  # fmt: skip
    assert code == 0
    return out, text


def test_a_run_writes_the_curve_the_head_and_a_model_card(trained):
    out, _ = trained
    report = json.loads((out / "training.json").read_text())
    assert report["target"] == "builtin:tiny" and report["steps"] == report["total_steps"] >= 3
    assert report["layers"] == [1, 3, 5]  # tiny's 6 layers: (2, 3, 3) is spread apart
    curve = report["curve"]
    assert [e["step"] for e in curve][:1] == [3] and curve[-1]["step"] == report["steps"]
    for entry in curve:
        assert len(entry["acceptance"]) == len(entry["expected"]) == 4  # K 4 positions
        assert all(0 <= a <= 1 for a in entry["expected"])
        assert 1.0 <= entry["mat_k3"] <= entry["mat_k4"] <= 5.0
    assert report["best"]["mat_k4"] == max(e["mat_k4"] for e in curve)
    assert report["tokens_seen"] > 0 and report["tokens_per_second"] > 0
    assert report["check_head"]["best_shift"] in (-1, 0, 1)  # measured on the written head
    card = (out / "README.md").read_text()
    assert "EAGLE-3 head for builtin:tiny" in card and "text.txt" in card
    config = json.loads((out / "config.json").read_text())
    assert config["eagle_aux_hidden_state_layer_ids"] == [1, 3, 5]
    assert config["draft_vocab_size"] == report["draft_vocab"]


def test_the_sglang_layout_names_midlayer_and_its_layer_ids_are_one_less(trained):
    out, _ = trained
    config = json.loads((out / "sglang" / "config.json").read_text())
    assert config["architectures"] == ["LlamaForCausalLMEagle3"]
    assert config["eagle_config"]["eagle_aux_hidden_state_layer_ids"] == [0, 2, 4]
    state = load_file(str(out / "sglang" / "model.safetensors"))
    ours = load_file(str(out / "model.safetensors"))
    assert "midlayer.self_attn.q_proj.weight" in state and "layers.0.mlp.up_proj.weight" in ours
    assert torch.equal(state["midlayer.mlp.up_proj.weight"], ours["layers.0.mlp.up_proj.weight"])
    assert torch.equal(state["d2t"], ours["d2t"])


def test_the_head_loads_and_drafts_in_a_session(trained, tmp_path, capsys):
    out, _ = trained
    trace = tmp_path / "run.jsonl"
    code = main(["run", "--target", "builtin:tiny", "--drafter", "eagle3", "--head", str(out),
                 "--prompt", "Why is the sky blue?", "--max-new-tokens", "12",
                 "--temperature", "0", "--trace", str(trace)])  # fmt: skip
    assert code == 0, capsys.readouterr().err
    rounds = [json.loads(x) for x in trace.read_text().splitlines()[1:]]
    drafted = sum(r.get("n_drafted", 0) for r in rounds if r.get("type") == "round")
    assert drafted > 0


def _fails(capsys, argv, needle: str) -> str:
    code = main(["train-head", "--target", "builtin:tiny", *argv, *FAST])
    err = capsys.readouterr().err
    lines = [x for x in err.splitlines() if x.startswith("specviz: error:")]
    assert code == 2 and len(lines) == 1 and needle in lines[0], err
    return lines[0]


@pytest.mark.parametrize(
    ("content", "needle"),
    [(b"", "is empty"), (b"\n  \n", "is empty"), (b"\x89PNG\r\n\x1a\n\0\0\0", "not UTF-8"),
     (b"ELF\0\0\1\n", "NUL byte"),
     (b"caf\xe9 au lait\n", "not UTF-8"), (b"a" * 5000 + b"\n", "longer than 1,000 bytes")],
)  # fmt: skip
def test_a_bad_corpus_is_one_line_and_exit_2_with_nothing_written(
    capsys, tmp_path, monkeypatch, content, needle
):
    monkeypatch.setenv("SPECVIZ_TRAIN_MAX_LINE", "1000")
    data = tmp_path / "corpus.txt"
    data.write_bytes(content)
    _fails(capsys, ["--data", str(data), "--out", str(tmp_path / "out")], needle)
    assert not (tmp_path / "out").exists()


def test_a_chat_file_without_an_assistant_turn_is_refused(capsys, tmp_path):
    data = tmp_path / "chats.jsonl"
    rows = [{"messages": [{"role": "user", "content": "Hello there"}]},
            {"question_id": 1, "turns": ["What is two and two?"]}]  # fmt: skip
    data.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    _fails(capsys, ["--data", str(data), "--out", str(tmp_path / "out")], "no assistant turns")
    assert not (tmp_path / "out").exists()


def test_an_unwritable_out_is_refused(capsys, tmp_path):
    text = write_text(tmp_path / "text.txt")
    _fails(capsys, ["--data", str(text), "--out", str(text / "head")], "is a file, not a folder")


def test_a_checkpoint_of_another_target_or_draft_vocabulary_is_refused(
    capsys, trained, pair_dirs, tmp_path
):
    out, text = trained
    before = {p.name: p.stat().st_mtime_ns for p in out.iterdir()}
    ckpt = str(out / "checkpoint.pt")
    code = main(["train-head", "--target", str(pair_dirs[0]), "--data", str(text), "--out",
                 str(tmp_path / "o"), "--resume", ckpt, *FAST])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2 and "trained for builtin:tiny" in err and len(err.strip().splitlines()) <= 3
    assert err.strip().splitlines()[-1].startswith("specviz: error:")
    _fails(capsys, ["--data", str(text), "--out", str(out), "--resume", ckpt,
                    "--draft-vocab", "100"], "draft vocabulary")  # fmt: skip
    assert {p.name: p.stat().st_mtime_ns for p in out.iterdir()} == before


@pytest.mark.parametrize("kind", ["llama", "qwen2", "qwen3"])
def test_llama_and_qwen_targets_train_and_their_heads_load(tmp_path, capsys, kind):
    """Random 4-layer targets of each family, builtin:tiny's tokenizer: a few steps write a
    head that the eagle3 loader takes, on the field's default layers."""
    import shutil

    import transformers

    from specviz.core.drafters.eagle3.format import build_head
    from specviz.core.models.builtin import get_pair

    tiny, _ = get_pair("tiny").resolve()
    config_class = {"llama": transformers.LlamaConfig, "qwen2": transformers.Qwen2Config,
                    "qwen3": transformers.Qwen3Config}[kind]  # fmt: skip
    config = config_class(
        vocab_size=8192, hidden_size=64, intermediate_size=128, num_hidden_layers=8,
        num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=512,
        tie_word_embeddings=False,
    )  # fmt: skip
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(config)
    target = tmp_path / kind
    model.save_pretrained(target)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(tiny / name, target / name)
    text = write_text(tmp_path / "text.txt")
    out = tmp_path / "head"
    code = main(["train-head", "--target", str(target), "--data", str(text), "--out", str(out),
                 "--epochs", "0.2", "--no-check", "--draft-vocab", "2048", *FAST])  # fmt: skip
    assert code == 0, capsys.readouterr().err
    head, head_config, _ = build_head(out, 8, 64, 8192)
    assert head_config.aux_layers == (2, 4, 5) and head_config.draft_vocab == 2048
