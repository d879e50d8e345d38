"""Chat by default (issue 36 item 1, issue 37's chat bullet): an instruct target (a chat
template, and a name or generation config that says instruct) gets its prompt as a user
turn; --no-chat keeps the raw text; the header records the rendered turn and the text typed.
builtin:smollm2's tokenizer is read from its committed folder (no model is loaded)."""

from __future__ import annotations

import json
import shutil
from types import SimpleNamespace

import pytest
from transformers import AutoTokenizer, GenerationConfig

from specviz.cli.main import main
from specviz.core.models.builtin import resources_dir
from specviz.core.models.chat import instruct_reason, session_prompt
from specviz.core.trace.files import load

SMOLLM2_TOKENIZER = resources_dir() / "models" / "smollm2" / "draft"
TINY_TOKENIZER = resources_dir() / "models" / "tiny" / "target"
TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)


@pytest.fixture(scope="module")
def smollm2_tokenizer():
    return AutoTokenizer.from_pretrained(SMOLLM2_TOKENIZER, local_files_only=True)


def fake_pair(tokenizer, name: str, path: str, generation_config=None):
    """What core.models.chat reads of a loaded pair, without its models."""
    target = SimpleNamespace(
        config=SimpleNamespace(_name_or_path=""), generation_config=generation_config
    )
    return SimpleNamespace(
        tokenizer=tokenizer, target=target, target_info=SimpleNamespace(name=name, path=path)
    )


def test_smollm2_is_an_instruct_target_and_tiny_is_not(smollm2_tokenizer):
    folder = "/home/u/.cache/specviz/smollm2-135m-instruct/target"  # where its target is converted
    reason = instruct_reason(smollm2_tokenizer, ["builtin:smollm2", folder])
    assert reason is not None and "instruct" in reason.lower()
    assert instruct_reason(smollm2_tokenizer, ["builtin:smollm2", "/models/smollm2/target"]) is None
    tiny = AutoTokenizer.from_pretrained(TINY_TOKENIZER, local_files_only=True)
    assert instruct_reason(tiny, ["builtin:tiny", "gpt2-instruct"]) is None  # no template


def test_a_generation_config_that_ends_on_the_turn_marker_marks_instruct(smollm2_tokenizer):
    end = smollm2_tokenizer.convert_tokens_to_ids("<|im_end|>")
    names = ["my-model", "/models/my-model"]
    assert instruct_reason(smollm2_tokenizer, names, GenerationConfig(eos_token_id=end))
    other = smollm2_tokenizer.convert_tokens_to_ids("<|endoftext|>")  # not in the template
    assert instruct_reason(smollm2_tokenizer, names, GenerationConfig(eos_token_id=other)) is None


def test_session_prompt_chats_by_default_for_smollm2(smollm2_tokenizer):
    pair = fake_pair(smollm2_tokenizer, "builtin:smollm2", "/c/smollm2-135m-instruct/target")
    text = "Explain why the sky is blue."
    rendered, record = session_prompt(pair, text, None)
    assert rendered.startswith("<|im_start|>") and text in rendered
    assert rendered.rstrip().endswith("<|im_start|>assistant")
    assert record["user"] == text and record["why"].startswith("by default")
    assert session_prompt(pair, text, False) == (text, None)  # --no-chat
    assert session_prompt(pair, text, True)[1]["why"] == "asked for (--chat)"
    raw = fake_pair(smollm2_tokenizer, "builtin:smollm2", "/models/plain/target")
    assert session_prompt(raw, text, None) == (text, None)


def test_chat_on_a_tokenizer_without_a_template_is_refused():
    tiny = AutoTokenizer.from_pretrained(TINY_TOKENIZER, local_files_only=True)
    pair = fake_pair(tiny, "builtin:tiny", "/r/tiny/target")
    assert session_prompt(pair, "x", None) == ("x", None)
    with pytest.raises(ValueError, match="no chat template"):
        session_prompt(pair, "x", True)


@pytest.fixture
def instruct_target(tmp_path, pair_dirs):
    """The test target with a chat template, in a folder whose name says instruct."""
    folder = tmp_path / "tiny-instruct"
    shutil.copytree(pair_dirs[0], folder)
    config = json.loads((folder / "tokenizer_config.json").read_text())
    config["chat_template"] = TEMPLATE
    (folder / "tokenizer_config.json").write_text(json.dumps(config))
    return folder


def test_run_chats_by_default_and_no_chat_keeps_the_text(
    instruct_target, pair_dirs, tmp_path, capsys
):
    base = ["run", "--target", str(instruct_target), "--draft", str(pair_dirs[1]),
            "--prompt", "Hi", "--max-new-tokens", "2", "--quiet"]  # fmt: skip
    trace = tmp_path / "chat.jsonl"
    assert main([*base, "--trace", str(trace)]) == 0
    header = load(trace).header
    assert header.prompt == "<|user|>Hi\n<|assistant|>" and header.typed_prompt == "Hi"
    assert "tiny-instruct" in header.chat["why"]
    raw = tmp_path / "raw.jsonl"
    assert main([*base, "--no-chat", "--trace", str(raw)]) == 0
    header = load(raw).header
    assert header.prompt == "Hi" and header.chat is None
    capsys.readouterr()
    assert main([*base[:-1], "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["chat"]["user"] == "Hi" and out["dtype"] == "float32" and out["greedy_diff"] is None


def test_the_window_takes_chat_and_no_chat(monkeypatch):
    from specviz.gui import app

    calls = []
    monkeypatch.setattr(app, "main", lambda *a, **kw: calls.append(kw) or 0)
    assert main(["--chat", "--pair", "tiny"]) == 0
    assert main(["--no-chat", "--pair", "tiny"]) == 0
    assert main(["--pair", "tiny"]) == 0
    assert [kw["chat"] for kw in calls] == [True, False, None]


def test_the_setup_box_offers_chat_for_an_instruct_target(qtbot):
    from specviz.gui.setup.controls import Controls

    controls = Controls()
    qtbot.addWidget(controls)
    assert not controls.chat()
    controls.offer_chat("its name says 'Instruct'")
    assert controls.chat() and "Instruct" in controls.chat_check.toolTip()
    controls.offer_chat(None)  # a base model loaded next
    assert not controls.chat()
    controls.set_chat(True, given=True)  # --chat: kept over loads
    controls.offer_chat(None)
    assert controls.chat()


def test_the_window_worker_offers_chat_and_sends_the_turn(qtbot, instruct_target, pair_dirs):
    from specviz.core.trace.records import Settings
    from specviz.gui.session.worker import EngineThread

    engine = EngineThread()
    engine.worker.calibrate = False
    try:
        with qtbot.waitSignal(engine.loaded, timeout=60_000) as blocker:
            engine.request_load.emit(str(instruct_target), str(pair_dirs[1]), "cpu", "float32")
        assert "instruct" in blocker.args[0].instruct
        for chat, prompt in ((True, "<|user|>Hi\n<|assistant|>"), (False, "Hi")):
            engine.request_chat.emit(chat)
            with qtbot.waitSignal(engine.session_started, timeout=60_000) as blocker:
                engine.request_start.emit("Hi", Settings(max_new_tokens=4))
            header = blocker.args[0]
            assert header.prompt == prompt and header.typed_prompt == "Hi"
            assert (header.chat is not None) is chat
    finally:
        assert engine.shutdown()


def test_tune_sweeps_chat_turns_for_an_instruct_target(instruct_target, pair_dirs, tmp_path):
    from specviz.core.models.pair import load_pair
    from specviz.core.tune.promptsets import Prompt, chat_prompts

    pair = load_pair(str(instruct_target), str(pair_dirs[1]))
    said = []
    turns = chat_prompts([Prompt("qa", "Hi")], pair, None, said.append)
    assert turns == [Prompt("qa", "<|user|>Hi\n<|assistant|>")] and "--no-chat" in said[0]
    assert chat_prompts([Prompt("qa", "Hi")], pair, False) == [Prompt("qa", "Hi")]


def test_bench_chats_by_default_for_an_instruct_target(
    instruct_target, pair_dirs, tmp_path, capsys
):
    """`specviz bench` takes chat as `run` and `tune` do (issue 36): on by default for an
    instruct target, said on stderr and in the JSON settings; --no-chat and a target without
    a template keep the raw text."""
    questions = tmp_path / "questions.jsonl"
    questions.write_text(json.dumps({"category": "qa", "turns": ["Hi"]}) + "\n")
    base = ["bench", "--draft", str(pair_dirs[1]), "--questions", str(questions),
            "--configs", "model:2", "--max-new-tokens", "2"]  # fmt: skip
    assert main([*base, "--target", str(instruct_target), "--json"]) == 0
    said = capsys.readouterr()
    settings = json.loads(said.out)["settings"]
    assert settings["chat"] is True and settings["chat_why"].startswith("by default: its name")
    assert "tiny-instruct" in settings["chat_why"] and "--no-chat: raw" in said.err
    assert main([*base, "--target", str(instruct_target), "--no-chat", "--json"]) == 0
    settings = json.loads(capsys.readouterr().out)["settings"]
    assert settings["chat"] is False and settings["chat_why"] is None
    assert main([*base, "--target", str(instruct_target)]) == 0
    assert "user turns of the target's chat template, by default" in capsys.readouterr().out
    assert main([*base, "--target", str(pair_dirs[0])]) == 0  # no template: the raw text
    assert "chat template" not in capsys.readouterr().out


def test_run_without_a_prompt_asks_a_chat_pair_a_question(smollm2_tokenizer):
    """`specviz run --pair smollm2` without --prompt: a chat question in the template, not
    the tiny pair's Bible verse (issue 48); --no-chat or a text pair: the continuation."""
    from argparse import Namespace

    from specviz.cli.session.run import _example_prompt
    from specviz.core.resources import chat_example_prompts, example_prompts

    chat_pair = fake_pair(smollm2_tokenizer, "builtin:smollm2", "/c/smollm2-135m-instruct/target")
    question = _example_prompt(Namespace(chat=None), chat_pair)
    assert question == chat_example_prompts()[0] and question != example_prompts()[0]
    assert _example_prompt(Namespace(chat=False), chat_pair) == example_prompts()[0]
    raw = fake_pair(smollm2_tokenizer, "builtin:smollm2", "/models/plain/target")
    assert _example_prompt(Namespace(chat=None), raw) == example_prompts()[0]
