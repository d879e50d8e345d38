"""A float32 CPU model's linear layers multiply 2..32 rows through a weight packed once
(core.models.packed_linear): the same products to rounding, nothing else about the model
changed, and plain products wherever the packed weight could be stale."""

from __future__ import annotations

import copy

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from specviz.core.models import packed_linear
from specviz.core.models.packed_linear import (
    MAX_ROWS,
    MIN_ROWS,
    PackedLinear,
    pack_linears,
    packed_bytes,
    unpack_linears,
)

pytestmark = pytest.mark.skipif(
    not packed_linear.available(), reason="packed only on x86-64 with oneDNN"
)
BUDGET = 1 << 30


@pytest.fixture
def calls(monkeypatch):
    """How many products went through a packed weight."""
    seen = []
    real = packed_linear._packed_product

    def counted(x, packed, bias):
        seen.append(x.numel() // x.shape[-1])
        return real(x, packed, bias)

    monkeypatch.setattr(packed_linear, "_packed_product", counted)
    return seen


def llama(seed: int = 0) -> LlamaForCausalLM:
    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=300, hidden_size=64, intermediate_size=128,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                         tie_word_embeddings=True)  # fmt: skip
    return LlamaForCausalLM(config).eval()


def test_few_rows_go_through_the_packed_weight_and_agree_with_f_linear(calls):
    torch.manual_seed(1)
    layer = torch.nn.Linear(96, 200)
    reference = copy.deepcopy(layer)
    assert pack_linears(layer, BUDGET) == 96 * 200 * 4 and type(layer) is PackedLinear
    for rows in (1, MIN_ROWS, 5, MAX_ROWS, MAX_ROWS + 1, 100):
        x = torch.randn(1, rows, 96)
        with torch.inference_mode():
            got, want = layer(x), reference(x)
        assert got.shape == want.shape == (1, rows, 200)
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    assert calls == [MIN_ROWS, 5, MAX_ROWS]  # one row and a prefill stay with the BLAS


def test_a_changed_or_copied_weight_is_multiplied_plainly(calls):
    torch.manual_seed(2)
    layer = torch.nn.Linear(32, 48, bias=False)
    pack_linears(layer, BUDGET)
    x = torch.randn(4, 32)
    with torch.no_grad():
        layer.weight.mul_(2)  # in place: the packed copy is stale
        assert torch.equal(layer(x), torch.nn.functional.linear(x, layer.weight))
    twin = copy.deepcopy(layer)  # a copy has no packed weight of its own
    assert type(twin) is PackedLinear and packed_bytes(twin) == 0
    with torch.no_grad():
        twin.weight.add_(1)
        assert torch.equal(twin(x), torch.nn.functional.linear(x, twin.weight))
    fresh = torch.nn.Linear(32, 48, bias=False)
    pack_linears(fresh, BUDGET)
    with torch.enable_grad():  # a trainable layer: its gradient, not the packed product
        fresh(x).sum().backward()
    assert fresh.weight.grad is not None and fresh.weight.grad.abs().sum() > 0
    half = copy.deepcopy(layer).to(torch.bfloat16)
    assert half(x.bfloat16()).dtype == torch.bfloat16
    assert calls == []


def test_a_packed_model_keeps_its_weights_ties_and_logits(calls):
    model, reference = llama(), llama()
    keys = list(model.state_dict())
    size = pack_linears(model, BUDGET)
    linears = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
    assert len(linears) == 2 * 7 + 1 and all(type(m) is PackedLinear for m in linears)
    assert size == packed_bytes(model) == sum(m.weight.numel() * 4 for m in linears)
    assert list(model.state_dict()) == keys
    assert model.lm_head.weight is model.model.embed_tokens.weight  # still tied
    ids = torch.tensor([[5, 17, 250, 3, 99, 42]])
    with torch.inference_mode():
        got, want = model(ids).logits, reference(ids).logits
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)
    assert len(calls) == len(linears)  # 6 rows: every product packed
    packed_linear.switch(model, False)  # a benchmark's plain side, nothing repacked
    with torch.inference_mode():
        torch.testing.assert_close(model(ids).logits, want, rtol=1e-4, atol=1e-5)
    assert len(calls) == len(linears) and packed_bytes(model) == 0
    packed_linear.switch(model, True)
    assert packed_bytes(model) == size
    assert unpack_linears(model) == len(linears) and packed_bytes(model) == 0
    assert all(type(m) is torch.nn.Linear for m in linears)


def test_nothing_is_packed_over_budget_switched_off_or_out_of_float32(monkeypatch):
    model = llama()
    assert pack_linears(model, budget=1000) == 0 and packed_bytes(model) == 0
    monkeypatch.setenv(packed_linear.ENV_SWITCH, "0")
    assert pack_linears(model, BUDGET) == 0
    monkeypatch.delenv(packed_linear.ENV_SWITCH)
    assert pack_linears(model.to(torch.bfloat16), BUDGET) == 0
    assert all(
        type(m) is torch.nn.Linear for m in model.modules() if isinstance(m, torch.nn.Linear)
    )


def test_a_layout_onednn_refuses_leaves_the_model_as_loaded(monkeypatch):
    model = llama()

    def refuse(weight):
        if weight.shape[0] == 128:  # the MLP's gate and up: after the attention's layers
            raise RuntimeError("unsupported")
        return torch.ops.mkldnn._reorder_linear_weight(weight, packed_linear.BLOCKED_FOR)

    monkeypatch.setattr(packed_linear, "_reorder", refuse)
    assert pack_linears(model, BUDGET) == 0 and packed_bytes(model) == 0
    assert all(
        type(m) is torch.nn.Linear for m in model.modules() if isinstance(m, torch.nn.Linear)
    )


def test_the_loader_packs_a_float32_cpu_target(tmp_path):
    from specviz.core.models.pair import load_pair
    from tests.fixtures import make_tokenizer

    tokenizer = make_tokenizer(300)
    llama(3).save_pretrained(tmp_path / "target")
    tokenizer.save_pretrained(tmp_path / "target")
    notes = []
    pair = load_pair(str(tmp_path / "target"), None, dtype="float32", progress=notes.append)
    assert packed_bytes(pair.target) > 0
    assert any("packed" in n for n in notes)
    assert packed_bytes(load_pair(str(tmp_path / "target"), None, dtype="bfloat16").target) == 0


def test_train_heads_teacher_is_not_packed(tmp_path):
    """train-head's teacher only runs prefills (hundreds of rows): packing would cost the
    weights' memory again for nothing."""
    from specviz.core.models.pair import load_pair
    from specviz.core.training.config import TrainConfig
    from specviz.core.training.setup import load_teacher
    from tests.fixtures import make_tokenizer

    make_tokenizer(300).save_pretrained(tmp_path / "target")
    llama(3).save_pretrained(tmp_path / "target")
    plain = load_pair(str(tmp_path / "target"), None, dtype="float32", pack_weights=False)
    assert packed_bytes(plain.target) == 0
    config = TrainConfig(target=str(tmp_path / "target"), out=str(tmp_path / "out"),
                         dtype="float32", device="cpu", layers=(0, 1))  # fmt: skip
    teacher, _, _ = load_teacher(config, "cpu", lambda m: None, None, False)
    assert packed_bytes(teacher.model) == 0
