"""The target as a teacher: one no-grad prefill over a batch gives, at every position, the
inputs of the aux layers (transformers' `hidden_states[i]`, what vLLM's EAGLE-3 hooks read)
and the final normed state, whose product with the LM head's rows is the target's logits.

The aux states are caught by pre-hooks on the decoder layers and only the base model runs,
so neither every layer's states nor the full-vocabulary logits of a batch are ever held.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from specviz.core.training.config import TrainError


def decoder_layers(model: nn.Module, n_layers: int) -> nn.ModuleList:
    """The target's list of decoder layers (Llama/Qwen `model.layers`, GPT-2
    `transformer.h`, ...): the first ModuleList of `n_layers` modules."""
    for module in model.base_model.modules():
        if isinstance(module, nn.ModuleList) and len(module) == n_layers:
            return module
    raise TrainError(
        f"cannot find the target's {n_layers} decoder layers "
        f"({type(model).__name__}): an architecture train-head does not know"
    )


@dataclass
class Prefill:
    """One batch's teacher pass (rows right-padded to T)."""

    aux: torch.Tensor  # [B, T, n_aux * H] the inputs of the aux layers
    last: torch.Tensor  # [B, T, H] the final normed state (the logits are last @ W.T)


class Teacher:
    """A loaded target, its aux layers hooked; the LM head's rows at hand."""

    def __init__(self, model: nn.Module, layers: tuple[int, ...]):
        self.model = model.eval()
        config = model.config.get_text_config()
        self.n_layers = config.num_hidden_layers
        self.hidden = config.hidden_size
        bad = [i for i in layers if not 0 <= i < self.n_layers]
        if bad or len(set(layers)) != len(layers) or not layers:
            raise TrainError(f"--layers {list(layers)}: distinct ids in 0..{self.n_layers - 1} "
                             f"(the target has {self.n_layers} layers)")  # fmt: skip
        self.layers = tuple(layers)
        self._caught: dict[int, torch.Tensor] = {}
        blocks = decoder_layers(model, self.n_layers)
        for i in self.layers:
            blocks[i].register_forward_pre_hook(self._catcher(i), with_kwargs=True)
        head = model.get_output_embeddings()
        self.weight = head.weight.detach()  # [V, H]
        self.bias = head.bias.detach() if getattr(head, "bias", None) is not None else None
        self.embed = model.get_input_embeddings().weight.detach()  # [V, H]
        self.device = self.embed.device

    def _catcher(self, index: int):
        def hook(module, args, kwargs):
            states = args[0] if args else kwargs["hidden_states"]
            self._caught[index] = states.detach()

        return hook

    @torch.no_grad()
    def prefill(self, ids: torch.Tensor, attention: torch.Tensor) -> Prefill:
        """ids, attention [B, T] (right-padded) -> the batch's states."""
        self._caught.clear()
        ids, attention = ids.to(self.device), attention.to(self.device)
        out = self.model.base_model(input_ids=ids, attention_mask=attention, use_cache=False)
        last = out.last_hidden_state if hasattr(out, "last_hidden_state") else out[0]
        aux = torch.cat([self._caught[i] for i in self.layers], -1)
        self._caught.clear()
        return Prefill(aux=aux, last=last)

    def logits(self, last: torch.Tensor, rows: torch.Tensor | None = None) -> torch.Tensor:
        """[N, H] final states -> [N, V] logits (over `rows` of the LM head only: [N, len])."""
        weight = self.weight if rows is None else self.weight[rows]
        out = last.to(weight.dtype) @ weight.T
        if self.bias is not None:
            out = out + (self.bias if rows is None else self.bias[rows])
        return out.float()

    def full_logsumexp(self, last: torch.Tensor, chunk: int = 1024) -> torch.Tensor:
        """[N] log-normalisers of the target's full-vocabulary logits, in chunks of rows."""
        parts = [torch.logsumexp(self.logits(last[i : i + chunk]), -1)
                 for i in range(0, last.shape[0], chunk)]  # fmt: skip
        return torch.cat(parts) if parts else last.new_zeros(0).float()


def pad_batch(seqs: list[tuple[int, ...]], pad: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(ids, attention) [B, T] right-padded."""
    width = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), width), pad, dtype=torch.long)
    attention = torch.zeros((len(seqs), width), dtype=torch.long)
    for i, s in enumerate(seqs):
        ids[i, : len(s)] = torch.tensor(s)
        attention[i, : len(s)] = 1
    return ids, attention
