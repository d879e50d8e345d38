"""scripts/head_data.py's batched decoding: rows of different lengths, left-padded into one
batch with a cache reserved once, finished rows leaving it now, later or never, give each row
the answer the target writes for it alone (transformers' greedy generate)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from tests.fixtures import script


@pytest.fixture(scope="module")
def head_data():
    with script("head_data") as module:
        yield module


@pytest.mark.parametrize("share", [0.0, 0.3, 1.0])
def test_a_batch_greedy_answers_each_row_as_generate_does_alone(head_data, monkeypatch, share):
    monkeypatch.setattr(head_data, "FINISHED_SHARE", share)  # every step, two by two, never
    batches, reserved = [], head_data.reserved_layer

    def recording(capacity):
        class Recording(reserved(capacity)):
            def update(self, key_states, *args, **kwargs):
                batches.append(key_states.shape[0])
                return super().update(key_states, *args, **kwargs)

        return Recording

    monkeypatch.setattr(head_data, "reserved_layer", recording)
    model, tok, _ = head_data.load_target("tiny", "float32")
    # tiny rarely writes its end token: a line break ends an answer here, so that rows end
    # at different steps and leave the batch
    newline = tok("\n")["input_ids"][-1]
    ends = SimpleNamespace(eos_token_id=newline, pad_token_id=None)
    texts = ["In the beginning", "And God said, Let there be", "Love is", "The Lord is my",
             "Blessed are the meek:", "Jesus wept."]  # fmt: skip
    rows = [tok(t)["input_ids"] for t in texts]
    assert len({len(r) for r in rows}) > 1  # left padding is exercised
    answers = head_data.sample_batch(model, ends, rows, 40, 0.0, None)
    for row, answer in zip(rows, answers, strict=True):
        alone = model.generate(torch.tensor([row]), attention_mask=torch.ones(1, len(row)),
                               max_new_tokens=40, do_sample=False, eos_token_id=newline,
                               pad_token_id=newline)[0, len(row) :].tolist()  # fmt: skip
        cut = alone.index(newline) + 1 if newline in alone else len(alone)
        assert answer == alone[:cut]
    lengths = sorted(len(a) for a in answers)
    assert lengths[0] < lengths[-1] and lengths[0] < 40  # rows ended early
    assert (min(batches) < len(rows)) == (share < 1)  # and left the batch, unless never


def test_sampled_rows_end_at_their_stop_token(head_data):
    model, tok, _ = head_data.load_target("tiny", "float32")
    rows = [tok(t)["input_ids"] for t in ("Blessed are", "The fool", "A man")]
    gen = torch.Generator().manual_seed(0)
    answers = head_data.sample_batch(model, tok, rows, 40, 1.0, gen)
    stops = {tok.eos_token_id, tok.pad_token_id} - {None}
    for answer in answers:
        assert 1 <= len(answer) <= 40
        assert not any(t in stops for t in answer[:-1])  # nothing after an end token
