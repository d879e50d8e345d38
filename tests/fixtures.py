"""Shared builders for the tests (and benchmarks/): small model folders, built from a config
and a tokenizer trained in seconds; hand-made rounds whose full distributions are known
(sample_rounds); synthetic, consistent traces of any length (synthetic_session); the
scripts in scripts/ as modules (script)."""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
import random
import sys
from collections.abc import Iterator
from pathlib import Path

from specviz.core.trace.records import ModelInfo, Round, SessionHeader, Settings, TokenEvent
from specviz.core.trace.serialize import dumps, header_to_json, round_to_json
from specviz.core.trace.session import Session

CORPUS = [
    "In the beginning God created the heaven and the earth.",
    "And the earth was without form, and void; and darkness was upon the face of the deep.",
    "A fool and his money are soon parted. A penny saved is a penny earned.",
    "The quick brown fox jumps over the lazy dog while the cat sleeps in the sun.",
    "You will meet a tall dark stranger who will teach you speculative decoding.",
] * 20


def make_tokenizer(vocab_size: int = 320, corpus: list[str] = CORPUS):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=["<|endoftext|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(corpus, trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<|endoftext|>",
        eos_token="<|endoftext|>",
        pad_token="<|endoftext|>",
    )


def make_model(vocab: int, n_layer: int, n_embd: int, seed: int, eos: int):
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(seed)
    config = GPT2Config(
        vocab_size=vocab, n_positions=256, n_embd=n_embd, n_layer=n_layer, n_head=2,
        bos_token_id=eos, eos_token_id=eos, pad_token_id=eos,
    )  # fmt: skip
    model = GPT2LMHeadModel(config)
    # Sharper logits than the default init, so acceptance and rejection both happen.
    with torch.no_grad():
        model.lm_head.weight.mul_(8.0)
    return model


def make_pair_dirs(root: Path, tokenizer=None, seed: int = 0) -> tuple[Path, Path]:
    tokenizer = tokenizer or make_tokenizer()
    vocab = len(tokenizer)
    eos = tokenizer.eos_token_id
    dirs = []
    for name, layers, width, s in (("target", 2, 64, seed), ("draft", 1, 32, seed + 1)):
        folder = root / name
        make_model(vocab, layers, width, s, eos).save_pretrained(folder)
        tokenizer.save_pretrained(folder)
        dirs.append(folder)
    return dirs[0], dirs[1]


# ------------------------------------------------------------------ hand-made rounds (bars)

SAMPLE_TEXTS = ("A", " the", " cat", "\n", "x", "ly")
# Round 0 (K=4): " the" accepted, " cat" rejected, "x" and "ly" discarded, "\n" resampled.
P0 = (0.1, 0.5, 0.2, 0.1, 0.05, 0.05)
Q0 = (0.05, 0.4, 0.3, 0.15, 0.05, 0.05)  # alpha = sum min = 0.85
P1 = (0.3, 0.1, 0.1, 0.3, 0.1, 0.1)
Q1 = (0.1, 0.1, 0.6, 0.1, 0.05, 0.05)  # alpha = 0.5; residual norm(max(0, p-q)) below
RESIDUAL1 = (0.4, 0.0, 0.0, 0.4, 0.1, 0.1)
Q2 = (0.2, 0.2, 0.2, 0.2, 0.1, 0.1)
N = 3  # top-N stored per position


def _sample_top(p, q, n=N):
    key = [max(a or 0, b or 0) for a, b in zip(p or [0] * 6, q or [0] * 6, strict=True)]
    ids = sorted(range(6), key=lambda i: -key[i])[:n]
    entries = tuple((i, None if p is None else p[i], None if q is None else q[i]) for i in ids)
    texts = tuple(SAMPLE_TEXTS[i] for i in ids)
    p_rest = None if p is None else 1 - sum(p[i] for i in ids)
    q_rest = None if q is None else 1 - sum(q[i] for i in ids)
    return entries, texts, p_rest, q_rest


def _event(token, status, p, q, **kw):
    top, texts, p_rest, q_rest = _sample_top(p, q)
    return TokenEvent(
        id=token, text=SAMPLE_TEXTS[token], status=status,
        p=None if p is None else p[token], q=None if q is None else q[token],
        top=top, top_text=texts, p_rest=p_rest, q_rest=q_rest, **kw,
    )  # fmt: skip


def sample_rounds(session_id: str = "5a0000000001") -> list[Round]:
    """Two rounds: [accepted, rejected, discarded, discarded, resampled], then
    [accepted, bonus]."""
    settings = Settings(k=4, top_n=N)
    r0 = (
        _event(1, "accepted", P0, Q0, accept_prob=1.0, u=0.3, alpha=0.85),
        _event(2, "rejected", P1, Q1, accept_prob=0.1 / 0.6, u=0.8, alpha=0.5),
        _event(4, "discarded", None, Q2),
        _event(5, "discarded", None, Q2),
        _event(
            3, "resampled", P1, Q1, alpha=0.5, residual=0.4,
            residual_top=((0, 0.4), (3, 0.4), (4, 0.1)),
        ),
    )  # fmt: skip
    r1 = (
        _event(0, "accepted", P0, P0, accept_prob=1.0, u=0.9, alpha=1.0),
        _event(1, "bonus", P0, None),
    )
    return [
        Round(session_id, 0, 3, 2.0, 5.0, 4, 1, r0, settings),
        Round(session_id, 1, 5, 1.0, 4.0, 1, 1, r1, Settings(k=1, top_n=N)),
    ]


def sample_header(session_id: str = "5a0000000001") -> SessionHeader:
    info = ModelInfo("toy", "/toy", 6, 100, "float32", "cpu")
    return SessionHeader(
        session_id=session_id, prompt="Once upon", prompt_ids=(0, 1, 2), target=info,
        draft=info, settings=Settings(k=4, top_n=N), created="2026-01-01T00:00:00+00:00",
        specviz="test", baseline_ms_per_token=10.0, draft_ms_per_token=2.0,
        prompt_text=("Once", " up", "on"),
    )  # fmt: skip


# ---------------------------------------------------------------------- synthetic traces

TEXTS = [" the", " and", " of", " God", " earth", "ly", ",", ".", " é", "\n", ' "q"', "日本"]


def synthetic_header(k: int = 4, top_n: int = 20, prompt_len: int = 8) -> SessionHeader:
    model = ModelInfo("synthetic", "synthetic", 50257, 1_000_000, "float32", "cpu")
    return SessionHeader(
        session_id="5e0000000001",  # 12 hex digits, as the engine writes
        prompt="In the beginning",
        prompt_ids=tuple(range(100, 100 + prompt_len)),
        prompt_text=tuple(TEXTS[i % len(TEXTS)] for i in range(prompt_len)),
        target=model,
        draft=model,
        settings=Settings(k=k, top_n=max(top_n, 1), max_new_tokens=10**9),
        created="2026-11-29T00:00:00+00:00",
        specviz="0.1.0",
        baseline_ms_per_token=10.0,
        draft_ms_per_token=2.0,
    )


EOS = 0  # the synthetic end-of-text token: no other token of a synthetic trace has this id


def _tops(rng: random.Random, n: int, count: int = 16) -> list[tuple[tuple, tuple, tuple]]:
    """A pool of top-N lists with full-precision floats, reused across positions, each as a
    judged position holds it ([id, p, q], by max(p, q)), a discarded one ([id, null, q]) and
    a bonus one ([id, p, null], by p)."""
    pool = []
    for _ in range(count):
        entries = [
            (rng.randrange(1, 50257), rng.random() / 20, rng.random() / 20) for _ in range(n)
        ]
        judged = tuple(sorted(entries, key=lambda e: -max(e[1], e[2])))
        discarded = tuple((i, None, q) for i, _, q in judged)
        bonus = tuple(sorted(((i, p, None) for i, p, _ in entries), key=lambda e: -e[1]))
        pool.append((judged, discarded, bonus))
    return pool


def synthetic_rounds(
    header: SessionHeader,
    n_rounds: int,
    seed: int = 0,
    eos_last: bool = False,
    top_n: int | None = None,
) -> Iterator[Round]:
    """Rounds that obey every rule core.trace.check_session checks (accept_prob = min(1, p/q),
    u against it, status order, counts, context_len). top_n = 0: no top-N lists, as a
    session run with trace=False."""
    rng = random.Random(seed)
    k = header.settings.k
    top_n = header.settings.top_n if top_n is None else top_n
    pool = _tops(rng, top_n) if top_n else [((), (), ())]
    texts = [tuple(TEXTS[(i * 7 + j) % len(TEXTS)] for j in range(top_n)) for i in range(4)]
    context = len(header.prompt_ids)
    for index in range(n_rounds):
        tokens: list[TokenEvent] = []
        rejected = False
        last = index == n_rounds - 1
        for j in range(k):
            judged_top, discarded_top, _ = rng.choice(pool)
            tid, text = rng.randrange(1, 50257), rng.choice(TEXTS)
            if rejected:
                tokens.append(
                    TokenEvent(
                        tid, text, "discarded", q=rng.random(), q_rest=0.5 if top_n else None,
                        top=discarded_top, top_text=texts[0],
                    )
                )  # fmt: skip
                continue
            if eos_last and last:  # every draft accepted, the last one end-of-text
                p, q, u = 0.5, 0.5, rng.random()
                tid = EOS if j == k - 1 else tid
            else:
                p, q, u = rng.random(), rng.random(), rng.random()
            accept = min(1.0, p / q)
            status = "accepted" if u < accept else "rejected"
            rejected = status == "rejected"
            tokens.append(
                TokenEvent(
                    tid, text, status, p=p, q=q, accept_prob=accept, u=u, alpha=rng.random(),
                    top=judged_top, top_text=texts[1], p_rest=0.25 if top_n else None,
                    q_rest=0.5 if top_n else None,
                )
            )  # fmt: skip
        if not (eos_last and last):
            judged_top, _, bonus_top = rng.choice(pool)
            tid, text, p = rng.randrange(1, 50257), rng.choice(TEXTS), rng.random()
            if rejected:
                tokens.append(
                    TokenEvent(
                        tid, text, "resampled", p=p, q=rng.random(), alpha=rng.random(),
                        residual=rng.random(), p_rest=0.25 if top_n else None,
                        q_rest=0.5 if top_n else None, top=judged_top, top_text=texts[2],
                        residual_top=tuple((i, 0.01) for i in range(top_n)),
                        residual_text=texts[3],
                    )
                )  # fmt: skip
            else:
                tokens.append(
                    TokenEvent(
                        tid, text, "bonus", p=p, p_rest=0.25 if top_n else None, top=bonus_top,
                        top_text=texts[2],
                    )
                )  # fmt: skip
        n_accepted = sum(t.status == "accepted" for t in tokens)
        rnd = Round(
            session_id=header.session_id,
            index=index,
            context_len=context,
            draft_ms=rng.random() * 5,
            verify_ms=rng.random() * 10,
            n_drafted=k,
            n_accepted=n_accepted,
            tokens=tuple(tokens),
            settings=header.settings,
            finish_reason=("eos" if eos_last else "max_new_tokens") if last else None,
        )
        context += rnd.n_emitted
        yield rnd


def synthetic_session(n_rounds: int = 20, k: int = 4, top_n: int = 20, **kwargs) -> Session:
    header = synthetic_header(k=k, top_n=top_n)
    return Session(header, list(synthetic_rounds(header, n_rounds, top_n=top_n, **kwargs)))


def synthetic_lines(n_rounds: int, k: int = 4, top_n: int = 20, seed: int = 0) -> Iterator[str]:
    """A trace's lines, one round at a time (no summary line): any length, little memory."""
    header = synthetic_header(k=k, top_n=top_n)
    yield dumps(header_to_json(header))
    for rnd in synthetic_rounds(header, n_rounds, seed=seed, top_n=top_n):
        yield dumps(round_to_json(rnd))


def all_details(session: Session) -> list[Round]:
    """Every round of a session with its top-N lists (a loaded trace defers them), to
    compare with the rounds that were written."""
    return [session.details(i) for i in range(len(session.rounds))]


def sample_session(n_rounds: int) -> Session:
    """The two sample rounds in turn, n_rounds of them, with room (max_new_tokens) for all
    the tokens they emit: a long valid trace for the window's tests."""
    header = sample_header()
    header = dataclasses.replace(header, settings=_roomy(header.settings))
    r0, r1 = sample_rounds()
    rounds = [
        dataclasses.replace(
            r1 if i % 2 else r0, index=i, context_len=3 + 2 * i, settings=_roomy(r0.settings)
        )
        for i in range(n_rounds)
    ]
    return Session(header, rounds)


def _roomy(settings: Settings) -> Settings:
    return dataclasses.replace(settings, max_new_tokens=10**6)


@contextlib.contextmanager
def script(name: str):
    """scripts/NAME.py as a module (the scripts are no package), in sys.modules while it is
    used (a dataclass looks its module up there)."""
    path = Path(__file__).resolve().parents[1] / "scripts" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.modules.pop(name, None)
