"""train-head's data: chats in a chat template with the loss on the assistant's tokens only,
ShareGPT and Spec-Bench rows read as chats, plain text said once for a target without a
template, weights that repeat a file in each epoch."""

from __future__ import annotations

import json

import pytest

from specviz.core.models.builtin import get_pair
from specviz.core.training import examples, sources
from specviz.core.training.config import TrainError

CHATML = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
)


@pytest.fixture(scope="module")
def tokenizer():
    from transformers import AutoTokenizer

    target, _ = get_pair("tiny").resolve()
    return AutoTokenizer.from_pretrained(target)


def _rows(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_messages_sharegpt_and_specbench_rows_are_chats(tmp_path):
    path = _rows(tmp_path / "mix.jsonl", [
        {"messages": [{"role": "user", "content": "Hi"},
                      {"role": "assistant", "content": "Hello"}]},
        {"conversations": [{"from": "human", "value": "Q?"}, {"from": "gpt", "value": "A."}]},
        {"question_id": 1, "turns": ["One?", "Two?"], "choices": [{"turns": ["1", "2"]}]},
        {"question_id": 2, "turns": ["No answer?"]},
        {"text": "Plain words in a JSON row."},
    ])  # fmt: skip
    source = sources.read_source(str(path))
    chats = [d.turns for d in source.documents if d.turns]
    assert chats[0] == (("user", "Hi"), ("assistant", "Hello"))
    assert chats[1] == (("user", "Q?"), ("assistant", "A."))
    assert chats[2] == (("user", "One?"), ("assistant", "1"), ("user", "Two?"), ("assistant", "2"))
    assert source.skipped == 1 and source.kind == "chat"
    assert [d.text for d in source.documents if d.text] == ["Plain words in a JSON row."]


def test_the_loss_falls_on_the_assistants_tokens_in_the_template(tokenizer):
    tokenizer.chat_template = CHATML
    try:
        doc = sources.Document(turns=(("user", "Why is the sky blue?"),
                                      ("assistant", "Because of scattering."),
                                      ("user", "And at sunset?"),
                                      ("assistant", "Red light passes.")))  # fmt: skip
        ex = examples.encode_chat(tokenizer, doc, True, 512, 0)
    finally:
        tokenizer.chat_template = None
    trained = [t for t, m in zip(ex.ids, ex.mask, strict=True) if m]
    text = tokenizer.decode(trained)
    assert "scattering" in text and "Red light" in text
    assert "sky" not in text and "sunset" not in text and "im_start" not in text


def test_a_target_without_a_template_reads_chats_as_text_said_once(tokenizer, tmp_path):
    path = _rows(tmp_path / "c.jsonl", [
        {"messages": [{"role": "user", "content": f"Question {i}?"},
                      {"role": "assistant", "content": f"The answer is {i} apples."}]}
        for i in range(3)
    ])  # fmt: skip
    said = []
    found = examples.encode_sources(tokenizer, [sources.read_source(str(path))], 64, said.append)
    assert len(said) == 1 and "no chat template" in said[0]
    trained = tokenizer.decode([t for t, m in zip(found[0].ids, found[0].mask, strict=True) if m])
    assert "apples" in trained and "Question" not in trained


def test_weights_repeat_a_file_in_each_epoch():
    assert sources.parse_specs(["a.txt:2,b.jsonl:0.5", "c.txt"]) == [
        ("a.txt", 2.0), ("b.jsonl", 0.5), ("c.txt", 1.0)]  # fmt: skip
    with pytest.raises(TrainError):
        sources.parse_specs(["a.txt:0"])
    pool = [examples.Example((1, 2, 3), (True,) * 3, i // 10) for i in range(20)]
    order = examples.epoch_order(pool, [2.0, 0.5], seed=1)
    assert sum(e.source == 0 for e in order) == 20 and sum(e.source == 1 for e in order) == 5
    stream = examples.batch_stream(pool, [2.0, 0.5], 4, 0, 7)
    again = examples.batch_stream(pool, [2.0, 0.5], 4, 0, 0)
    assert next(stream) == [b for _, b in zip(range(8), again, strict=False)][-1]


def test_token_id_shards_are_read_with_their_answer_starts_and_tokenizer(tokenizer, tmp_path):
    folder = tmp_path / "chats"
    folder.mkdir()
    seqs = [(list(range(10, 30)), 5), (list(range(40, 52)), 8)]
    sources.write_id_shard(folder / "shard-0000.safetensors", seqs)
    meta = {"format": sources.SHARDS, "target": "builtin:tiny",
            "tokenizer_sha": sources.tokenizer_sha(tokenizer)}  # fmt: skip
    (folder / "meta.json").write_text(json.dumps(meta))
    source = sources.read_source(str(folder))
    assert source.kind == "ids" and source.bytes < 4 * 32 + 400  # int32 ids, small header
    assert source.licence.startswith("not known")  # the meta names none
    (folder / "meta.json").write_text(json.dumps({**meta, "licence": "the target's own text"}))
    assert sources.read_source(str(folder)).licence == "the target's own text"
    (folder / "meta.json").write_text(json.dumps(meta))
    found = examples.encode_sources(tokenizer, [source], 64, print)
    assert [list(e.ids) for e in found] == [s for s, _ in seqs]
    assert [e.mask.index(True) for e in found] == [5, 8]
    (folder / "meta.json").write_text(json.dumps({**meta, "tokenizer_sha": "0" * 16}))
    with pytest.raises(TrainError, match="another tokenizer"):
        examples.encode_sources(tokenizer, [sources.read_source(str(folder))], 64, print)


def test_the_token_budget_counts_the_positions_a_loss_falls_on(tokenizer, tmp_path):
    """Issue 50 counts training tokens as positions that carry a loss: a run on chats whose
    prompts are half of each sequence stops at --tokens trained positions, not at --tokens
    read, and training.json says both."""
    from specviz.cli.main import main
    from tests.train_head_data import FAST

    folder = tmp_path / "chats"
    folder.mkdir()
    rng = __import__("random").Random(3)
    seqs = [([rng.randrange(5, 250) for _ in range(40)], 20) for _ in range(48)]
    sources.write_id_shard(folder / "shard-0000.safetensors", seqs)
    meta = {"format": sources.SHARDS, "target": "builtin:tiny",
            "tokenizer_sha": sources.tokenizer_sha(tokenizer)}  # fmt: skip
    (folder / "meta.json").write_text(json.dumps(meta))
    out = tmp_path / "head"
    code = main(["train-head", "--target", "builtin:tiny", "--data", str(folder), "--out",
                 str(out), *FAST, "--epochs", "4", "--tokens", "400",
                 "--eval-every", "100", "--no-check"])  # fmt: skip
    assert code == 0
    report = json.loads((out / "training.json").read_text())
    per_step = 4 * 20  # 4 sequences, 20 answer positions each (ids 20..39)
    assert report["stopped"] == "tokens"
    assert 400 <= report["trained_tokens"] < 400 + per_step
    assert report["tokens_seen"] == 2 * report["trained_tokens"]  # the prompts are read too
    assert report["curve"][-1]["trained"] == report["trained_tokens"]
