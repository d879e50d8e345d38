"""The EAGLE-3 drafter: a head that reads the target's own hidden states (`--drafter eagle3
--head DIR|HF_ID`; a built-in pair's own head without --head).

State between rounds: the head's cache holds one entry per "true" pair (x_{j+1}, h_j) with
h_j the target's aux states at position j, for j < `fed`; `pending` holds the target's
states it has handed over (Drafter.accept_states) for j = fed, fed + 1, ... A round first
feeds the pending pairs (the last emitted tokens), whose last output gives the first
draft's logits, then drafts on its own output states (what the head was trained for:
training-time test). The entries of drafted positions are dropped after verification: the
target's states replace them.

The head's logits cover its draft vocabulary; q lives on the target's vocabulary with zero
mass elsewhere (d2t maps the ids), so the verification rules judge it like any draft.
"""

from __future__ import annotations

import math
import statistics
import time
from pathlib import Path
from typing import Any

import torch
from transformers import DynamicCache

from specviz.core.decoding.forward import max_positions
from specviz.core.decoding.kv_cache import crop_to
from specviz.core.decoding.proposal import Proposal, TreeShape
from specviz.core.decoding.warp import sample, warp
from specviz.core.drafters.base import Drafter
from specviz.core.drafters.eagle3.fit import fit, misfit_note, probe_sequence
from specviz.core.drafters.eagle3.format import HeadError, build_head
from specviz.core.drafters.eagle3.head import Eagle3Head, HeadCache, HeadConfig
from specviz.core.drafters.tree_draft import TreeDraft, _expanded, grow_level
from specviz.core.models.kept import PerModel
from specviz.core.trace.records import ModelInfo
from specviz.core.trace.tree_nodes import node_depths
from specviz.core.tree.attention import additive, visibility

TIMING_CONTEXT = 128  # pairs a timing run feeds before its steps


class Eagle3Drafter(Drafter):
    kind = "eagle3"

    def __init__(self, head: Eagle3Head, config: HeadConfig, target, source: str,
                 info: ModelInfo, vocab: int, eos: int | None, notes: list[str]):  # fmt: skip
        self.head, self.config, self.target, self.source = head, config, target, source
        self.info, self.vocab, self.eos, self.notes = info, vocab, eos, tuple(notes)
        self.target_layers = tuple(config.aux_layers)
        self.embed = head.embed if head.embed is not None else target.get_input_embeddings().weight
        to_target = head.draft_to_target  # [Vd] target id of each draft id
        self._in_vocab = to_target < vocab  # [Vd] the draft ids the target can take
        self._target_ids = to_target[self._in_vocab]
        self._all_in = bool(self._in_vocab.all())  # then _full needs no mask per step
        # a greedy chain step can then skip the target's vocabulary (_greedy): every draft id
        # is the target's and in the same order, so an argmax tie goes to the same token
        self._ordered = self._all_in and bool((to_target[1:] > to_target[:-1]).all())
        self.cache = HeadCache()
        self.fed = 0
        self.pending = self._empty()
        self.last_out: torch.Tensor | None = None  # [H] the head's last output state

    def describe(self) -> dict[str, Any]:
        return {"kind": self.kind, "head": self.source}

    def _empty(self) -> torch.Tensor:
        width = len(self.config.aux_layers) * self.config.target_hidden
        return torch.zeros((0, width), device=self.head.fc.weight.device)

    # ------------------------------------------------------------------ the head's passes

    def _full(self, logits: torch.Tensor) -> torch.Tensor:
        """Draft-vocabulary logits [..., Vd] -> target-vocabulary logits [..., V], -inf
        where the head cannot propose."""
        full = torch.full((*logits.shape[:-1], self.vocab), float("-inf"), device=logits.device)
        if self._all_in:  # the usual head: every draft id is one of the target's
            return full.index_copy_(-1, self._target_ids, logits.float())
        full[..., self._target_ids] = logits[..., self._in_vocab].float()
        return full

    def _step(self, tokens, states, positions, mask=None, cache=None):
        """(logits [T, V] on the target's vocabulary, out [T, H]) of the head on pairs."""
        logits, out = self._head_step(tokens, states, positions, mask, cache)
        return self._full(logits), out

    def _head_step(self, tokens, states, positions, mask=None, cache=None):
        """(logits [T, Vd] on the draft vocabulary, out [T, H]) of the head on pairs."""
        device = self.head.fc.weight.device
        ids = torch.tensor(tokens, device=self.embed.device)
        embeds = self.embed.index_select(0, ids).to(device)  # [T, H]
        pos = torch.tensor(positions, dtype=torch.long, device=device)
        return self.head(embeds, states, pos, mask, self.cache if cache is None else cache)

    def _greedy(self, logits: torch.Tensor, generator) -> tuple[int, torch.Tensor]:
        """(token, q [V]) as sample(warp(_full(logits))) gives them at T 0, from the draft
        logits [Vd] alone (for an ordered map, _ordered): the argmax (the first of a tie, in
        draft and target order alike) mapped to its target id, q one-hot there, and the one
        uniform draw sample() takes from the generator, so that its stream stays the same."""
        torch.rand((), generator=generator, dtype=torch.float64, device=logits.device)
        token = int(self._target_ids[int(logits.argmax())])
        q = torch.zeros(self.vocab, device=logits.device)
        q[token] = 1.0
        return token, q

    def _catch_up(self, ids: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
        """Feed the pending pairs (j = fed .. len(ids) - 2): the draft-vocabulary logits [Vd]
        of the token after ids and the head's output state there."""
        n = self.pending.shape[0]
        if self.fed + n != len(ids) - 1:
            raise RuntimeError(f"eagle3: {self.fed} pairs fed and {n} states pending for a "
                               f"context of {len(ids)} tokens")  # fmt: skip
        tokens = ids[self.fed + 1 : self.fed + 1 + n]
        positions = list(range(self.fed + 1, self.fed + 1 + n))
        logits, out = self._head_step(tokens, self.head.project(self.pending), positions)
        self.fed += n
        self.pending = self._empty()
        self.last_out = out[-1]
        return logits[-1], out[-1]

    # ------------------------------------------------------------------- the drafter seam

    def prefill(self, ids: list[int], target_cache: DynamicCache) -> None:
        """A new session: the pending states are the prompt's (accept_states came first);
        every pair but the last is fed now, so a round starts with one pair to feed."""
        self.cache, self.fed, self.last_out = HeadCache(), 0, None
        self.pending = self.pending[self.pending.shape[0] - (len(ids) - 1) :] if len(ids) > 1 \
            else self._empty()  # fmt: skip
        with torch.inference_mode():
            if self.pending.shape[0] > 1:
                rows, self.pending = self.pending[:-1], self.pending[-1:]
                self._head_step(ids[1 : 1 + rows.shape[0]], self.head.project(rows),
                                list(range(1, 1 + rows.shape[0])))  # fmt: skip
                self.fed = rows.shape[0]

    def accept_states(self, states: torch.Tensor) -> None:
        self.pending = torch.cat([self.pending, states.to(self.pending.device)])

    def rollback(self, length: int) -> None:
        crop_to(self.cache, min(self.fed, length))  # drafted entries go: they read no h
        self.fed = min(self.fed, length)

    def propose(self, ids, k, config, generator, keep_drafting) -> Proposal:
        if len(ids) < 2:  # no target state yet: the target's own token this round
            return Proposal.empty("limit")
        logits, out = self._catch_up(ids)  # [Vd], [H]
        tokens, q_rows, stop = [], [], "k"
        fast = config.greedy and keep_drafting is None and self._ordered
        for i in range(k):
            if fast:  # the same token, q and draws without the target's vocabulary
                token, q = self._greedy(logits, generator)
            else:
                full = self._full(logits)  # [V]
                q = warp(full, config)  # [V]
                token = sample(q, generator)
            tokens.append(token)
            q_rows.append(q)
            if token == self.eos:
                stop = "eos"
                break
            if keep_drafting is not None and len(tokens) < k:
                confidence = torch.softmax(full, -1)[token] if config.greedy else q[token]
                if not keep_drafting(float(confidence)):
                    stop = "threshold"
                    break
            if i + 1 < k:  # the next pair: this draft and the head's own state
                step_logits, step_out = self._head_step([token], out[None], [len(ids) + i])
                logits, out = step_logits[0], step_out[0]
                self.last_out = out
        return Proposal.chain(tokens, q_rows, stop)

    def propose_tree(self, ids, shape: TreeShape, config, generator) -> Proposal:
        """A token tree (core.drafters.tree_draft's shapes and draws) on the head: a level
        per head pass, each node fed with its parent's output state at context + depth."""
        out = TreeDraft(rule=shape.rule(config))
        if len(ids) < 2:
            return out.proposal()
        logits, state = self._catch_up(ids)
        node_logits, node_state = {-1: self._full(logits)}, {-1: state}
        context = self.cache.get_seq_length()  # the true pairs
        frontier, cumulative = [-1], {-1: 0.0}
        for level in range(shape.depth):
            room = shape.budget - len(out.tokens)
            chosen = _expanded(frontier, cumulative, shape)[: math.ceil(room / shape.width)]
            if level:
                visible = visibility(out.parents, chosen, out.slots, self.cache.get_seq_length(),
                                     context)  # fmt: skip
                mask = additive(visible, self.head.fc.weight.dtype).to(state.device)
                depth = node_depths(out.parents)  # 1: a child of the context
                states = torch.stack([node_state[out.parents[n]] for n in chosen])
                rows, outs = self._step(
                    [out.tokens[n] for n in chosen],
                    states,
                    [len(ids) + depth[n] - 1 for n in chosen],
                    mask,
                )
                for row, node in enumerate(chosen):  # fmt: skip
                    node_logits[node], node_state[node] = rows[row], outs[row]
            level_logits = [node_logits[node] for node in chosen]
            grown = grow_level(out, chosen, level_logits, shape, config, generator, cumulative,
                               self.eos)  # fmt: skip
            if not grown or len(out.tokens) >= shape.budget:
                break
            frontier = grown
        return out.proposal()  # keep: rollback, the path's states come from the target

    def next_q(self, ids, config):
        """(q_raw, q) [V] float64 after ids from a fresh target pass and a fresh head."""
        if len(ids) < 2:
            return None
        from specviz.core.decoding.forward import forward_states

        with torch.inference_mode():
            _, states = forward_states(self.target, ids[:-1], DynamicCache(), self.vocab, 1,
                                       self.target_layers)  # fmt: skip
            logits, _ = self._step(ids[1:], self.head.project(states.to(self.pending.device)),
                                   list(range(1, len(ids))), cache=HeadCache())  # fmt: skip
        last = logits[-1]
        return torch.softmax(last, -1).double(), warp(last, config).double()

    @torch.inference_mode()
    def measure_ms(self, ids: list[int], n_tokens: int) -> float:
        """Median time of one head step after up to TIMING_CONTEXT pairs (their states'
        values do not change the cost: zeros)."""
        cache, tail = HeadCache(), ids[-TIMING_CONTEXT:]
        width = self.head.config.hidden
        zeros = torch.zeros((len(tail), width), device=self.head.fc.weight.device)
        _, out = self._step(tail, zeros, list(range(1, len(tail) + 1)), cache=cache)
        times, state = [], out[-1:]
        for i in range(n_tokens + 2):
            start = time.perf_counter()
            logits, state = self._step([tail[-1]], state, [len(tail) + 1 + i], cache=cache)
            int(logits[0].argmax())
            if i >= 2:
                times.append(1000 * (time.perf_counter() - start))
        return statistics.median(times)

    @torch.inference_mode()
    def step_ms(self, ids, config, generator, device) -> float:
        """One draft step on the session's cache (the head's last state, warp, sample; at T 0
        the step propose takes, _greedy), cropped back."""
        length = self.cache.get_seq_length()
        state = (
            self.last_out
            if self.last_out is not None
            else torch.zeros(self.head.config.hidden, device=self.head.fc.weight.device)
        )
        start = time.perf_counter()
        if config.greedy and self._ordered:
            logits, _ = self._head_step([ids[-1]], state[None], [length + 1])
            self._greedy(logits[0], generator)
        else:
            logits, _ = self._step([ids[-1]], state[None], [length + 1])
            sample(warp(logits[0].to(device), config), generator)
        ms = 1000 * (time.perf_counter() - start)
        crop_to(self.cache, length)
        return ms


# ------------------------------------------------------------------------------ building


def resolve_head(head: str | None, pair) -> tuple[Path, str, bool]:
    """(folder, the name to record, whether it is a built-in pair's head)."""
    from specviz.core.models.builtin import PREFIX, BuiltinError, builtin_head

    if head is None or head.startswith(PREFIX):
        name = head or pair.target_info.name
        if not name.startswith(PREFIX):
            raise ValueError("the eagle3 drafter needs a head: give --head DIR (a folder in "
                             "the speculators format) or a hub id; the built-in pairs have "
                             "their own (--pair smollm2 or --pair tiny)")  # fmt: skip
        try:
            folder = builtin_head(name)
        except BuiltinError as e:
            raise ValueError(str(e)) from None
        return folder, f"{name} (built-in head)", True
    from specviz.core.models.pair import ModelLoadError, resolve_spec

    try:
        source, local = resolve_spec(head, "head")
    except ModelLoadError as e:
        raise ValueError(str(e)) from None
    if not local:
        source = _hub_folder(head)
    return Path(source), head, False


def _hub_folder(repo: str) -> str:
    """A hub head's folder from the local cache (downloaded only if not there and the hub
    answers), as the pair loader does for models."""
    from huggingface_hub import snapshot_download

    from specviz.core.models.pair import _hub_reachable

    try:
        return snapshot_download(repo, local_files_only=True)
    except Exception:  # noqa: BLE001 - not cached
        if not _hub_reachable():
            raise ValueError(f"head '{repo}' is not in the local Hugging Face cache and the "
                             "hub cannot be reached; pass a local folder") from None  # fmt: skip
    try:
        return snapshot_download(repo, allow_patterns=["*.json", "*.safetensors", "*.bin"])
    except Exception as e:  # noqa: BLE001
        raise ValueError(f"head '{repo}' could not be downloaded: {e}") from None


# Heads loaded, placed and probed in this process: a bench or the window starts a session
# (and a drafter) per question, and each would read the files and run the probe again.
_LOADED: PerModel[tuple[Eagle3Head, HeadConfig, tuple[str, ...]]] = PerModel(2)


def _files(folder: Path) -> tuple:
    """What identifies a head folder's version: its weight and config files' sizes and times."""
    found = [f for f in sorted(folder.glob("*")) if f.suffix in (".json", ".safetensors", ".bin")]
    return tuple((f.name, f.stat().st_size, f.stat().st_mtime_ns) for f in found[:64])


def build(params, pair) -> Eagle3Drafter:
    target = pair.target
    folder, name, builtin = resolve_head(params.get("head"), pair)
    dtype, device = next(target.parameters()).dtype, next(target.parameters()).device
    path = str(folder.resolve())
    key = (path, _files(folder), str(dtype), str(device), builtin)
    head, head_config, notes = _LOADED.get(target, key, lambda: _load(folder, builtin, pair))
    info = ModelInfo(name=name, path=path, vocab_size=pair.vocab_size,
                     params=sum(p.numel() for p in head.parameters()),
                     dtype=str(dtype).removeprefix("torch."), device=str(device))  # fmt: skip
    return Eagle3Drafter(head, head_config, target, name, info, pair.vocab_size,
                         pair.eos_token_id, list(notes))  # fmt: skip


def _load(folder: Path, builtin: bool, pair) -> tuple[Eagle3Head, HeadConfig, tuple[str, ...]]:
    """The head from its folder, on the target's device and dtype, and what its load found
    (the checks' warnings, the layer probe's)."""
    target = pair.target
    config = target.config.get_text_config() if hasattr(target.config, "get_text_config") \
        else target.config  # fmt: skip
    n_layers = config.num_hidden_layers
    try:
        # a head stored without lm_head takes the target's rows by d2t; the built-in heads
        # are stored so on purpose (to stay small), so only another head's load says so
        head, head_config, notes = build_head(
            folder, n_layers, config.hidden_size, pair.vocab_size,
            target.get_output_embeddings().weight, lm_head_note=not builtin,
        )  # fmt: skip
    except HeadError as e:
        raise ValueError(str(e)) from None
    if head_config.verifier and not _same_target(head_config.verifier, pair.target_info):
        notes.append(f"the head was trained for {head_config.verifier!r}, not this target "
                     f"({pair.target_info.name}): expect little acceptance")  # fmt: skip
    device = next(target.parameters()).device
    head.to(device=device, dtype=next(target.parameters()).dtype)
    embed = head.embed if head.embed is not None else target.get_input_embeddings().weight
    ids, start = probe_sequence(pair.tokenizer)  # one target pass, three head passes
    ids = ids[: max_positions(target) or len(ids)]
    misfit = misfit_note(fit(head, embed, target, [ids], [start], steps=1))
    if misfit:
        notes.append(misfit)
    return head, head_config, tuple(notes)


def _same_target(verifier: str, info: ModelInfo) -> bool:
    names = {info.name, info.path, Path(info.path).name, Path(info.name).name}
    return verifier in names or Path(verifier).name in names
