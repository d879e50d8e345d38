"""Two or more heads of one target on the same held-out sequences, paired: each head's
simulated #MAT at K 4 (sampled at T 1 and greedy) and, against the first head, the difference
with a bootstrap interval over the sequences (drawn whole, the same draw for both heads).

A head replaces the shipped one on an interval, not on a point: a block of training that moves
#MAT by +0.02 is inside what one run's sampling resolves, but its paired difference on the
same sequences can exclude zero. `scripts/head_compare.py` runs it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import torch

from specviz.core.training import examples, sources
from specviz.core.training.config import TrainConfig
from specviz.core.training.objective import Tallies, tally

LEVEL = 0.95
DRAWS = 2000
KEYS = ("mat_k4", "mat_k4_greedy")


def paired_difference(base: Tallies, other: Tallies, draws: int = DRAWS, seed: int = 0) -> dict:
    """{key: (other - base, low, high)} for the simulated #MAT keys, the LEVEL percentile
    interval of the difference over `draws` resamples of the sequences."""
    n = base.alpha.shape[0]
    if other.alpha.shape != base.alpha.shape:
        shapes = f"{tuple(base.alpha.shape)} against {tuple(other.alpha.shape)}"
        raise ValueError(f"the heads were measured on different sequences or steps: {shapes}")
    gen = torch.Generator().manual_seed(seed)
    drawn = {key: [] for key in KEYS}
    for _ in range(draws):
        pick = torch.randint(0, n, (n,), generator=gen)
        a, b = base.summary(pick), other.summary(pick)
        for key in KEYS:
            drawn[key].append(b[key] - a[key])
    whole_a, whole_b = base.summary(), other.summary()
    tail = (1 - LEVEL) / 2
    out = {}
    for key in KEYS:
        values = torch.tensor(drawn[key], dtype=torch.float64)
        low, high = torch.quantile(values, torch.tensor([tail, 1 - tail], dtype=torch.float64))
        out[key] = (round(whole_b[key] - whole_a[key], 4), round(float(low), 4),
                    round(float(high), 4))  # fmt: skip
    return out


def compare_heads(target: str, heads: list[Path], eval_data: list[str], steps: int = 4,
                  max_length: int = 512, device: str = "cpu", dtype: str = "float32",
                  say: Callable[[str], None] = print) -> list[tuple[Path, Tallies]]:  # fmt: skip
    """Each head's tallies on the held-out chats eval_data, one target loaded for all (the
    heads must read the same layers: the first head's are hooked)."""
    from specviz.core.training.setup import load_teacher, pad_id, warm_head

    config = TrainConfig(target=target, out="", from_head=str(heads[0]), dtype=dtype,
                         max_length=max_length)  # fmt: skip
    teacher, tokenizer, target_config = load_teacher(config, device, say, warm=True)
    held = examples.encode_sources(tokenizer, sources.read_sources(eval_data), max_length,
                                   lambda m: None)[: examples.MAX_EVAL]  # fmt: skip
    out = []
    for path in heads:
        head, ids = warm_head(replace(config, from_head=str(path)), teacher, target_config, False)
        if tuple(head.config.aux_layers) != tuple(teacher.layers):
            raise ValueError(f"{path} reads layers {list(head.config.aux_layers)}, the first "
                             f"head {list(teacher.layers)}")  # fmt: skip
        say(f"measuring {path} on {len(held)} held-out sequences")
        ids = torch.tensor(ids, device=teacher.device)
        tallies = tally(head.to(teacher.device), teacher, held, ids, steps, config.pack_tokens,
                        pad_id(tokenizer))  # fmt: skip
        out.append((path, tallies))
    return out
