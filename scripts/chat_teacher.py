"""The teacher for distil_smollm2.py --chat: chats the target wrote itself (head_data.py).

head_data.py's token-id shards hold, per chat, the token ids (the target's own chat template,
a user turn it wrote Magpie-style and its answer, greedy or sampled) and where the answer
starts; they are read by specviz.core.training.sources, as `train-head --data FOLDER` reads
them. A prefill gives the target's final normed hidden state at every position, and its
distribution there is softmax(lm_head(last)); its top-k log-probabilities are the teacher, as
distill_smollm2.py's own generations keep them. The loss counts the positions that predict an
answer token (the draft drafts answers); the last `held` chats are held out.

    python scripts/head_data.py --pair smollm2 --out /tmp/chat --shards 40
    python scripts/distill_smollm2.py --chat /tmp/chat --steps 2000 --out /tmp/draft-chat
"""

from __future__ import annotations

import time
from pathlib import Path

import torch


def load_chats(folder: Path) -> tuple[dict, list[dict]]:
    """(meta.json, chats) of a folder of head_data.py's token-id shards."""
    from specviz.core.training.config import TrainError
    from specviz.core.training.sources import read_source

    if list(Path(folder).glob("shard-*.pt")) and not (Path(folder) / "meta.json").exists():
        raise SystemExit(f"{folder} holds shards of an older head_data.py (hidden states, "
                         "7.5 GB per million tokens): write token-id shards with it")  # fmt: skip
    try:
        source = read_source(str(folder))
    except TrainError as e:
        raise SystemExit(f"{e} (write the shards with scripts/head_data.py)") from None
    if source.kind != "ids":
        raise SystemExit(f"{folder} is no folder of token-id shards (scripts/head_data.py)")
    chats = [{"ids": torch.tensor(d.ids), "start": d.start} for d in source.documents]
    return source.meta, chats


def teacher(chats: list[dict], lm_head: torch.Tensor, top_k: int, pad_id: int) -> dict:
    """distill_smollm2.make_data's layout over `chats`: tokens [N, L] padded with pad_id,
    the target's top-k at positions 0..L-2 (idx [N, L-1, k] int32, lp float16) and a mask
    [N, L-1], True where the next token is an answer token."""
    t0 = time.perf_counter()
    length = max(len(c["ids"]) for c in chats)
    n = len(chats)
    tokens = torch.full((n, length), pad_id, dtype=torch.long)
    idx = torch.zeros((n, length - 1, top_k), dtype=torch.int32)
    lp = torch.full((n, length - 1, top_k), -30.0, dtype=torch.float16)
    mask = torch.zeros((n, length - 1), dtype=torch.bool)
    weight = lm_head.to(torch.bfloat16)  # [V, D]: AMX units make this fast, as the target ran
    with torch.inference_mode():
        for row, chat in enumerate(chats):
            ids, start = chat["ids"], int(chat["start"])
            t = len(ids)
            tokens[row, :t] = ids
            logits = chat["last"][: t - 1].to(torch.bfloat16) @ weight.T  # [t-1, V]
            logp = torch.log_softmax(logits.float(), -1)
            top = logp.topk(top_k, dim=-1)
            idx[row, : t - 1] = top.indices.to(torch.int32)
            lp[row, : t - 1] = top.values.to(torch.float16)
            mask[row, max(start - 1, 0) : t - 1] = True  # position i predicts ids[i + 1]
    return {"tokens": tokens, "idx": idx, "lp": lp, "mask": mask,
            "seconds": time.perf_counter() - t0}  # fmt: skip


def load(folder: Path, target, top_k: int, held: int) -> tuple[dict, dict, dict]:
    """(train, held-out, facts about the data) from head_data.py's shards in `folder`."""
    meta, chats = load_chats(folder)
    with torch.inference_mode():  # the final states from a prefill
        for chat in chats:
            out = target.base_model(input_ids=chat["ids"].long()[None])
            chat["last"] = out.last_hidden_state[0].float()
    if len(chats) <= held:
        raise SystemExit(f"{folder} has {len(chats)} chats: not more than the {held} held out")
    pad = target.config.eos_token_id
    pad = pad[0] if isinstance(pad, list) else pad
    head = target.get_output_embeddings().weight.detach()
    train, test = chats[:-held], chats[-held:]
    facts = {
        "folder": str(folder),
        "shards": len(list(Path(folder).glob("shard-*.safetensors"))),
        "chats": len(train),
        "heldout_chats": len(test),
        "greedy_share": meta.get("greedy_share"),  # of the shards, as head_data.py was run
        "answer_tokens": sum(len(c["ids"]) - int(c["start"]) for c in train),
        "tokens": sum(len(c["ids"]) for c in train),
    }
    return teacher(train, head, top_k, pad), teacher(test, head, top_k, pad), facts
