"""How well an EAGLE-3 head fits a target, and on which layers: teacher-forced passes.

A head reads the target's states at its aux layers. The engines' users' most common
failure is a head whose layer ids are off by one (or trained for another target): it loads,
drafts, and its acceptance silently falls to a few percent. `fit` measures, on sequences
the target wrote itself (greedy), how often the head's greedy draft at each position equals
the target's greedy token, given that the drafts before it did (the conditional acceptance
of greedy drafting, EAGLE's alpha per position), once with the configured layer ids and once
with each shifted by -1 and +1. The passes are those of training-time test
(speculators' `Eagle3DraftModel`): step s feeds the head its own output states of step s - 1
and sees, besides the true context, only its own earlier steps at the same position; with
teacher-forced tokens this equals drafting wherever the earlier drafts matched, which is
where the rate at step s is counted.

Whether another shift fits *clearly* better is a paired test at the first draft position,
where the head reads the target's states directly: at each position the chance that a first
draft sampled from the head is kept at T 1, sum_x min(p(x), q(x)) (EAGLE's expected
acceptance), on both shifts; a paired z test on their differences (the mean difference over
its standard error: the differences are bounded, so the normal approximation holds on a few
hundred positions). It uses every position where a test on greedy matches (McNemar's) uses
only those where the two disagree: on smollm2's 356-position load probe a head whose ids were
all moved by one is called at z 4.2 where McNemar's gave 1.3.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import torch
from transformers import DynamicCache

from specviz.core.drafters.eagle3.head import Eagle3Head

SHIFTS = (-1, 0, 1)
# What the load-time probe reads: questions and answers the project wrote, in the target's
# chat template where it has one (about 400 tokens: one target pass).
PROBE = (
    ("Why is the sky blue? Explain it in simple terms.",
     "The sky looks blue because of the way sunlight is scattered by the air. Sunlight is "
     "made of many colours. When it enters the atmosphere, it hits tiny molecules of gas. "
     "Blue light has a shorter wavelength than red light, so it is scattered much more. "
     "This scattered blue light comes to our eyes from every part of the sky."),
    ("Write a short email to a friend inviting them to dinner on Saturday.",
     "Hi Sam,\n\nI hope you are well! Would you like to come over for dinner on Saturday "
     "evening? I am planning to cook a big pot of pasta and bake an apple pie. Let me know "
     "if seven o'clock works for you.\n\nBest wishes,\nAlex"),
    ("A shop sells apples at 40 cents each. How much do 5 apples cost?",
     "Each apple costs 40 cents, so 5 apples cost 5 x 40 = 200 cents. Since 100 cents make "
     "one dollar, 200 cents is 2 dollars. The answer is 2 dollars."),
    ("Give me three tips for sleeping better.",
     "1. Go to bed and wake up at the same time every day, even at weekends.\n2. Keep your "
     "bedroom dark, quiet and cool, and avoid screens for an hour before bed.\n3. Avoid "
     "coffee and heavy meals in the evening, and get some exercise during the day."),
)  # fmt: skip


def ttt_passes(
    head: Eagle3Head,
    embed: torch.Tensor,
    ids: torch.Tensor,
    aux: torch.Tensor,
    pos: torch.Tensor,
    doc: torch.Tensor,
    steps: int,
) -> Iterator[torch.Tensor]:
    """The head's outputs [T, H] (its logits are `head.logits` of them) at each of `steps`
    training-time-test steps over T packed pairs (ids[t] = x_{t+1}, aux[t] = the target's
    aux states at t, pos[t] = t + 1 within its document, doc[t] = its document). Row t of
    step s predicts x_{t+2+s}."""
    n = ids.shape[0]
    causal = torch.ones(n, n, dtype=torch.bool, device=ids.device).tril()
    causal &= doc[:, None] == doc[None, :]
    eye = torch.eye(n, dtype=torch.bool, device=ids.device)
    dtype = head.fc.weight.dtype
    cache = DynamicCache()
    states, tokens = head.project(aux), ids
    for s in range(steps):
        visible = torch.cat([causal] + [eye] * s, 1)  # [T, (s + 1) T]
        mask = torch.zeros(visible.shape, dtype=dtype, device=ids.device)
        mask = mask.masked_fill(~visible, torch.finfo(dtype).min)
        states = head.layer_out(embed[tokens], states, pos + s, mask[None, None], cache)
        yield states
        tokens = torch.cat([ids[1 + s :], ids.new_zeros(1 + s)])  # teacher forcing


@dataclass(frozen=True)
class Fit:
    """The head on one choice of layers: acceptance at each draft position."""

    shift: int
    layers: tuple[int, ...] | None  # None: a shifted id falls outside the target
    acceptance: tuple[float, ...]  # conditional, per draft position (1..steps)
    counted: tuple[int, ...]  # positions each rate is counted over
    # [positions] float: the first draft's expected acceptance at T 1 at each counted
    # position, sum_x min(p, q) (z_score pairs two fits on it)
    first: torch.Tensor | None = field(default=None, compare=False, repr=False)

    @property
    def expected(self) -> float:
        """The first draft's mean expected acceptance at T 1 (0 where nothing was counted)."""
        return float(self.first.mean()) if self.first is not None and len(self.first) else 0.0

    @property
    def mean_accepted(self) -> float:
        """Expected drafts accepted per round of len(acceptance) greedy drafts."""
        total, run = 0.0, 1.0
        for a in self.acceptance:
            run *= a
            total += run
        return total

    def to_json(self) -> dict:
        return {
            "shift": self.shift,
            "layers": None if self.layers is None else list(self.layers),
            "acceptance": [round(a, 4) for a in self.acceptance],
            "positions": list(self.counted),
            "mean_accepted": round(self.mean_accepted, 4),
            "expected_first": round(self.expected, 4),
        }


def target_states(target, seq: Sequence[int], columns: torch.Tensor):
    """One sequence's target pass: (all hidden states [L + 1, T, H], its greedy ids [T], its
    probabilities of the target ids `columns` [T, len(columns)])."""
    device = next(target.parameters()).device
    with torch.inference_mode():
        result = target(input_ids=torch.tensor([list(seq)], device=device),
                        output_hidden_states=True)  # fmt: skip
        logits = result.logits[0]
        probs = logits.float().softmax(-1)[:, columns.to(device)]
    return torch.stack([h[0] for h in result.hidden_states]), logits.argmax(-1), probs


def fit(
    head: Eagle3Head,
    embed: torch.Tensor,
    target,
    sequences: Sequence[Sequence[int]],
    starts: Sequence[int],
    steps: int,
    shifts: Sequence[int] = SHIFTS,
) -> list[Fit]:
    """The head's greedy acceptance per draft position on each layer shift. sequences[i]'s
    tokens from starts[i] on are the target's own greedy continuation (a draft counts where
    the token it drafts lies there; starts[i] = 1 counts every position, which at step 1
    measures agreement with the target's greedy choice on any text). One sequence's target
    pass is held at a time."""
    n_layers = target.config.get_text_config().num_hidden_layers
    chosen = {s: tuple(layer + s for layer in head.config.aux_layers) for s in shifts}
    chosen = {s: ls if all(0 <= layer < n_layers for layer in ls) else None
              for s, ls in chosen.items()}  # fmt: skip
    hits = {s: [0] * steps for s in shifts}
    counts = {s: [0] * steps for s in shifts}
    first: dict[int, list[torch.Tensor]] = {s: [] for s in shifts}
    for seq, start in zip(sequences, starts, strict=True):
        states, greedy, probs = target_states(target, seq, head.draft_to_target)
        for shift in shifts:
            if chosen[shift] is None:
                continue
            hit, count, expected = _sequence_fit(head, embed, states, greedy, probs, seq,
                                                 start, chosen[shift], steps)  # fmt: skip
            hits[shift] = [a + b for a, b in zip(hits[shift], hit, strict=True)]
            counts[shift] = [a + b for a, b in zip(counts[shift], count, strict=True)]
            first[shift].append(expected)
        del states, greedy, probs
    fits = []
    for shift in shifts:
        if chosen[shift] is None:
            fits.append(Fit(shift, None, (), ()))
            continue
        rates = tuple(h / c if c else 0.0 for h, c in zip(hits[shift], counts[shift], strict=True))
        fits.append(Fit(shift, chosen[shift], rates, tuple(counts[shift]),
                        torch.cat(first[shift])))  # fmt: skip
    return fits


def _sequence_fit(head, embed, states, greedy, probs, seq, start, layers, steps):
    """(hits, counts) per step on one sequence, and the first drafts' expected acceptance
    where counted: row t drafts x_{t+2+s}; it counts at step s where steps < s matched and
    x_{t+2+s} is the target's own (index >= start)."""
    n = len(seq) - 1
    if n < 1:
        return [0] * steps, [0] * steps, torch.zeros(0)
    to_target = head.draft_to_target.to(embed.device)
    ids = torch.tensor(list(seq[1:]), device=embed.device)
    aux = torch.cat([states[layer][:-1] for layer in layers], -1)
    pos = torch.arange(1, n + 1, device=embed.device)
    doc = torch.zeros(n, dtype=torch.long, device=embed.device)
    alive = torch.ones(n, dtype=torch.bool, device=embed.device)
    hits, counts, expected = [], [], torch.zeros(0)
    with torch.inference_mode():
        for s, out in enumerate(ttt_passes(head, embed, ids, aux, pos, doc, steps)):
            logits = head.logits(out)
            rows = torch.arange(n, device=embed.device)
            index = rows + 1 + s  # the target's greedy choice there predicts x_{t+2+s}
            inside = (index < len(seq)) & (index + 1 >= start)
            drafted = to_target[logits.argmax(-1)]
            match = torch.zeros(n, dtype=torch.bool, device=embed.device)
            match[inside] = drafted[inside] == greedy[index[inside]]
            counted = alive & inside
            hits.append(int((counted & match).sum()))
            counts.append(int(counted.sum()))
            if s == 0:  # sum_x min(p, q) over the draft vocabulary (q is 0 elsewhere)
                q = logits[inside].float().softmax(-1)
                p = probs[index[inside]].to(q.device)
                expected = torch.minimum(p, q).sum(-1).cpu()
            alive &= match
    return hits, counts, expected


def greedy_answers(target, prompts: Sequence[Sequence[int]], tokens: int, eos: int | None,
                   batch: int = 8) -> list[list[int]]:  # fmt: skip
    """Each prompt followed by the target's greedy answer of at most `tokens` tokens (up to
    and with its end token, as generate() one prompt at a time gives it): the sequences
    `fit` measures on. Prompts go `batch` at a time, padded on the left and masked (18
    answers of 64 tokens: 26.7 s of CPU instead of 65.7 on smollm2, 1.7 instead of 5.4 on
    tiny, every token the same in float32)."""
    device = next(target.parameters()).device
    pad = eos if eos is not None else 0  # the padding: masked on the left, cut on the right
    ends = getattr(target.generation_config, "eos_token_id", None)  # what stops generate()
    ends = set(ends if isinstance(ends, list) else [ends]) - {None}
    out = []
    for first in range(0, len(prompts), batch):
        chunk = [list(p) for p in prompts[first : first + batch]]
        width = max(map(len, chunk))
        ids = torch.tensor([[pad] * (width - len(p)) + p for p in chunk], device=device)
        mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in chunk],
                            device=device)  # fmt: skip
        with torch.inference_mode():
            rows = target.generate(ids, attention_mask=mask, max_new_tokens=tokens,
                                   do_sample=False, pad_token_id=pad).tolist()  # fmt: skip
        for prompt, row in zip(chunk, rows, strict=True):
            answer = row[width:]
            stop = next((i for i, t in enumerate(answer) if t in ends), None)
            if stop is not None:  # its end token, then a finished row's padding
                answer = answer[: stop + 1]
            out.append(prompt + answer)
    return out


def best(fits: Sequence[Fit]) -> Fit:
    """The fit whose first drafts match the target most often (the configured one on a
    tie): position 1 reads the target's states directly; later positions read the head's."""
    measured = [f for f in fits if f.layers is not None]
    return max(measured, key=lambda f: (round(f.acceptance[0], 6), f.shift == 0))


def z_score(top: Fit, own: Fit) -> float:
    """The paired z of top against own on the same first-draft positions: the mean of the
    differences of their expected acceptance over its standard error (0 on fewer than two
    positions; infinite where every difference is the same non-zero value)."""
    diff = (top.first - own.first).double()
    if len(diff) < 2:
        return 0.0
    mean, error = float(diff.mean()), float(diff.std()) / len(diff) ** 0.5
    if error == 0.0:
        return 0.0 if mean == 0.0 else float("inf") if mean > 0 else float("-inf")
    return mean / error


CLEAR = 3.09  # one-sided p 0.001: a shift "fits better" only past this


def misfit_note(fits: Sequence[Fit]) -> str | None:
    """A warning when another layer shift fits clearly (CLEAR) better than the configured."""
    own = next((f for f in fits if f.shift == 0 and f.layers is not None), None)
    top = best(fits)
    if own is None or top.shift == 0:
        return None
    z = z_score(top, own)
    if z < CLEAR:
        return None
    return (
        f"the head fits the target's layers {list(top.layers)} (ids shifted by "
        f"{top.shift:+d}) better than its own {list(own.layers)}: its first drafts match the "
        f"target's {top.acceptance[0]:.2f} of the time against {own.acceptance[0]:.2f} "
        f"(expected acceptance at T 1 {top.expected:.2f} against {own.expected:.2f}, paired z "
        f"{z:.1f}); its eagle_aux_hidden_state_layer_ids may be off by one "
        "(specviz check-head tells more)"
    )


def probe_sequence(tokenizer) -> tuple[list[int], int]:
    """(ids, start) of the load-time probe: the project's questions and answers, in the chat
    template where the tokenizer has one; every position counts (start 1)."""
    if getattr(tokenizer, "chat_template", None):
        messages = []
        for question, answer in PROBE:
            messages += [{"role": "user", "content": question},
                         {"role": "assistant", "content": answer}]  # fmt: skip
        text = tokenizer.apply_chat_template(messages, tokenize=False)
    else:
        text = "\n\n".join(f"{q}\n{a}" for q, a in PROBE)
    return list(tokenizer(text)["input_ids"]), 1
