"""Loading as transformers users do (issue 16 item 1): --dtype auto, --device-map through
accelerate, the draft's own device, attn_implementation, a chat template, the model's own
generation_config.json, trust_remote_code off by default."""

from __future__ import annotations

import json
import shutil

import pytest
import torch
from transformers import AutoConfig

from specviz.cli.main import main
from specviz.core.engine.speculative import SpeculativeEngine
from specviz.core.models.generation import generation_settings
from specviz.core.models.pair import LoadOptions, ModelLoadError, load_pair
from specviz.core.trace.files import load
from specviz.core.trace.records import Settings

CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)


def greedy_tokens(pair, n_rounds=4):
    engine = SpeculativeEngine(pair, Settings(k=3, temperature=0.0, max_new_tokens=12))
    engine.prefill("In the beginning")
    return [t.id for rnd in engine.run() for t in rnd.tokens if t.status != "discarded"]


def test_device_map_auto_on_cpu_gives_the_same_rounds(pair_dirs, monkeypatch):
    from transformers import AutoModelForCausalLM

    plain = load_pair(str(pair_dirs[0]), str(pair_dirs[1]))
    calls = []
    real = AutoModelForCausalLM.from_pretrained

    def spy(*args, **kwargs):
        calls.append(kwargs.get("device_map"))
        return real(*args, **kwargs)

    monkeypatch.setattr(AutoModelForCausalLM, "from_pretrained", spy)
    mapped = load_pair(
        str(pair_dirs[0]), str(pair_dirs[1]), LoadOptions(device_map="auto", draft_device="cpu")
    )
    assert calls == ["auto", None]  # the target placed by accelerate, the draft moved
    assert mapped.target_info.device == "map: cpu" and mapped.draft_info.device == "cpu"
    assert mapped.device == mapped.draft_device == torch.device("cpu")
    assert greedy_tokens(mapped) == greedy_tokens(plain)


def test_device_map_from_the_command_line(capsys, pair_dirs, tmp_path):
    trace = tmp_path / "t.jsonl"
    args = ["run", "--target", str(pair_dirs[0]), "--draft", str(pair_dirs[1])]
    code = main([*args, "--device-map", "auto", "--prompt", "x", "--max-new-tokens", "4",
                 "--trace", str(trace), "--quiet"])  # fmt: skip
    assert code == 0, capsys.readouterr().err
    assert load(trace).header.target.device == "map: cpu"
    with pytest.raises(SystemExit):
        main([*args, "--device-map", '{"": "tpu"}'])
    assert "is not a device" in capsys.readouterr().err


def test_dtype_config_takes_the_stored_dtype(pair_dirs):
    pair = load_pair(str(pair_dirs[0]), str(pair_dirs[1]), dtype="config")
    stored = json.loads((pair_dirs[0] / "config.json").read_text()).get("dtype", "float32")
    assert pair.target_info.dtype == stored


def test_attn_implementation_is_passed_on(pair_dirs):
    pair = load_pair(str(pair_dirs[0]), str(pair_dirs[1]), attn_implementation="eager")
    assert pair.target.config._attn_implementation == "eager"
    with pytest.raises(ModelLoadError):
        load_pair(str(pair_dirs[0]), str(pair_dirs[1]), attn_implementation="no-such-kernel")


@pytest.fixture
def own_target(tmp_path, pair_dirs):
    folder = tmp_path / "target"
    shutil.copytree(pair_dirs[0], folder)
    return folder


def test_chat_wraps_the_prompt_in_the_template(capsys, own_target, pair_dirs, tmp_path):
    args = ["run", "--target", str(own_target), "--draft", str(pair_dirs[1]), "--prompt", "Hi",
            "--chat", "--max-new-tokens", "2", "--quiet"]  # fmt: skip
    assert main(args) == 2
    assert "no chat template" in capsys.readouterr().err
    config = json.loads((own_target / "tokenizer_config.json").read_text())
    config["chat_template"] = CHAT_TEMPLATE
    (own_target / "tokenizer_config.json").write_text(json.dumps(config))
    trace = tmp_path / "chat.jsonl"
    assert main([*args, "--trace", str(trace)]) == 0
    assert load(trace).header.prompt == "<|user|>Hi\n<|assistant|>"


def test_generation_config_shown_and_adopted(capsys, own_target, pair_dirs, tmp_path):
    (own_target / "generation_config.json").write_text(
        json.dumps(
            {
                "do_sample": True,
                "temperature": 0.7,
                "top_k": 20,
                "top_p": 0.9,
                "max_new_tokens": 5,
                "eos_token_id": 0,
            }
        )  # fmt: skip
    )
    base = ["run", "--target", str(own_target), "--draft", str(pair_dirs[1]), "--prompt", "x",
            "--quiet"]  # fmt: skip
    trace = tmp_path / "a.jsonl"
    assert main([*base, "--trace", str(trace)]) == 0
    err = capsys.readouterr().err
    assert "temperature=0.7" in err and "--use-generation-config" in err
    assert load(trace).header.settings.temperature == 1.0  # shown, not used
    trace = tmp_path / "b.jsonl"
    assert main([*base, "--use-generation-config", "--top-p", "0.5", "--trace", str(trace)]) == 0
    settings = load(trace).header.settings
    assert (settings.temperature, settings.top_k, settings.max_new_tokens) == (0.7, 20, 5)
    assert settings.top_p == 0.5  # the command line wins


def test_generation_settings_follow_transformers_defaults():
    assert generation_settings({}) == {"temperature": 0.0}  # generate() is greedy by default
    assert generation_settings({"do_sample": True}) == {
        "temperature": 1.0,
        "top_k": 50,
        "top_p": 1.0,
    }


def test_trust_remote_code_is_passed_when_given(own_target, pair_dirs):
    config = json.loads((own_target / "config.json").read_text())
    config["auto_map"] = {"AutoModelForCausalLM": "modeling_x.X"}
    (own_target / "config.json").write_text(json.dumps(config))
    with pytest.raises(ModelLoadError, match="--trust-remote-code"):
        load_pair(str(own_target), str(pair_dirs[1]))
    with pytest.raises(ModelLoadError) as err:  # trusted: transformers looks for the code
        load_pair(str(own_target), str(pair_dirs[1]), trust_remote_code=True)
    assert "--trust-remote-code" not in str(err.value), str(err.value)


def test_deprecated_device_auto_still_works(pair_dirs):
    notes = []
    pair = load_pair(str(pair_dirs[0]), str(pair_dirs[1]), device="auto", progress=notes.append)
    assert pair.device.type in ("cpu", "cuda")
    assert any("deprecated" in n and "--device-map" in n for n in notes)


def _refused(capsys, target, draft) -> str:
    code = main(["run", "--target", str(target), "--draft", str(draft), "--max-new-tokens", "2"])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    return err


def test_a_model_with_nan_weights_is_refused_before_it_runs(capsys, own_target, pair_dirs):
    """NaN or inf weights ended in an IndexError deep in sampling: now one line, exit 2."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(own_target)
    with torch.no_grad():
        next(model.parameters()).view(-1)[0] = float("nan")
    model.save_pretrained(own_target)
    err = _refused(capsys, own_target, pair_dirs[1])
    assert "NaN or infinite" in err and "target" in err


def test_a_masked_lm_is_refused_by_name(capsys, own_target, pair_dirs):
    """A BERT saved with save_pretrained loads through AutoModelForCausalLM as an LM head and
    ran with meaningless figures: refused, naming its architecture."""
    from transformers import BertConfig, BertForMaskedLM

    vocab = AutoConfig.from_pretrained(own_target).vocab_size
    config = BertConfig(vocab_size=vocab, hidden_size=32, num_hidden_layers=1,
                        num_attention_heads=2, intermediate_size=64)  # fmt: skip
    BertForMaskedLM(config).save_pretrained(own_target)  # the tokenizer files stay
    err = _refused(capsys, pair_dirs[0], own_target)
    assert "BertForMaskedLM is not a causal language model" in err and "draft" in err


def test_a_draft_that_reads_8_positions_runs_within_them(capsys, pair_dirs, tmp_path):
    """The calibration decoded 16 tokens past a short draft's limit (IndexError even for a
    1-token prompt): it now stays within the context the models read."""
    from transformers import AutoModelForCausalLM

    folder = tmp_path / "short"
    shutil.copytree(pair_dirs[1], folder)
    model = AutoModelForCausalLM.from_pretrained(folder)
    model.config.n_positions = 8
    model.transformer.wpe.weight.data = model.transformer.wpe.weight.data[:8].clone()
    model.transformer.wpe.num_embeddings = 8
    model.save_pretrained(folder)
    args = ["run", "--target", str(pair_dirs[0]), "--draft", str(folder), "--prompt", "a"]
    code = main([*args, "--max-new-tokens", "20", "--json"])
    out, err = capsys.readouterr()
    assert code == 0 and "Traceback" not in err, err
    result = json.loads(out)
    assert result["tokens"] >= 1 and result["rounds"] >= 1
