"""Suffix decoding (Oliaro et al., arXiv:2411.04975; vLLM's method "suffix", Arctic
Inference): no model, q one-hot, as prompt lookup.

Two sources of text: this request (its prompt and output so far) and the outputs of earlier
requests (a bounded cache, kept in a file across sessions). In each, the longest suffix of
the context (at most `suffix_depth` tokens) that occurred before with something after it is
the match; every occurrence of it votes for what followed. A chain takes the most frequent
next token while its share of the match's occurrences (the path's probability, the product
of the counts' ratios along it) stays >= `suffix_min_prob`; a tree (tree_width > 1) adds
the likeliest paths first. Either way at most min(K, spec_factor x the match's length)
tokens: a short match is a weak guess, so it drafts little. The source whose proposal
expects more accepted tokens (the sum of its probabilities) is used.

Exact at any temperature: a chain's q is one-hot, so a drafted x is kept with p(x) and a
rejection resamples from p without x; a tree's children are distinct and chosen without
randomness, judged by the "topk" rule (core.tree.walk). Its q at a node, shown in the tree
record, is the continuations' frequencies there; the rule does not use it.
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import heapq
import json
import math
import os
from pathlib import Path
from typing import Any

import numpy as np
import torch

from specviz.core import resources
from specviz.core.decoding.proposal import Proposal
from specviz.core.drafters.base import (
    Drafter,
    ms_per_call,
    one_hot,
    one_hot_next,
)
from specviz.core.drafters.tree_draft import TreeDraft
from specviz.core.trace.extras.matched import SuffixMatch
from specviz.core.trace.records import ModelInfo

FORMAT = "specviz.suffix-cache/1"
MAX_CACHE_TOKENS = 500_000  # tokens the cross-request cache holds at most (oldest go first)
MAX_FILE_BYTES = 16 << 20  # a cache file larger than this is refused unread
SEP = -1  # between cached requests: never equals a token, so no match crosses it


def match_ends(seq: np.ndarray, context: list[int], depth: int) -> tuple[int, np.ndarray]:
    """(m, ends): the longest m <= depth such that the context's last m tokens occur in seq
    ending at j with a token after them (seq[j + 1] is not SEP, j + 1 < len(seq)), and those
    positions j. (0, empty) without a match."""
    empty = np.zeros(0, dtype=np.int64)
    if len(seq) < 2 or not context:
        return 0, empty
    ends = np.flatnonzero(seq[:-1] == context[-1])  # [candidates] the match's last token
    ends = ends[seq[ends + 1] != SEP]
    best, best_ends = 0, empty
    for i, token in enumerate(reversed(context[-depth:])):  # the match grows leftwards
        if i:
            ends = ends[ends >= i]
            ends = ends[seq[ends - i] == token]
        if not len(ends):
            break
        best, best_ends = i + 1, ends
    return best, best_ends


def continuations(seq: np.ndarray, ends: np.ndarray, length: int) -> list[list[int]]:
    """What followed each match end, up to `length` tokens, cut at SEP; most recent first."""
    out = []
    for j in ends[::-1].tolist():
        follow = seq[j + 1 : j + 1 + length].tolist()
        out.append(follow[: follow.index(SEP)] if SEP in follow else follow)
    return out


def best_chain(follows: list[list[int]], length: int, min_prob: float, eos: int | None):
    """(tokens, probs, cut): the most frequent path through the continuations (ties: the
    most recent), each token's probability its share of all occurrences; cut says why it
    ended: "length", "min_prob", "eos" or "end" (nothing followed)."""
    tokens: list[int] = []
    probs: list[float] = []
    live, total = follows, len(follows)
    while len(tokens) < length:
        counts: dict[int, int] = {}
        for f in live:
            if len(f) > len(tokens):
                counts[f[len(tokens)]] = counts.get(f[len(tokens)], 0) + 1
        if not counts:
            return tokens, probs, "end"
        token = max(counts, key=counts.__getitem__)  # first seen = most recent on a tie
        if counts[token] / total < min_prob:
            return tokens, probs, "min_prob"
        tokens.append(token)
        probs.append(counts[token] / total)
        live = [f for f in live if len(f) >= len(tokens) and f[len(tokens) - 1] == token]
        if token == eos:
            return tokens, probs, "eos"
    return tokens, probs, "length"


def best_tree(follows, budget: int, depth: int, width: int, min_prob: float, eos, vocab: int,
              device) -> tuple[TreeDraft, list[float]]:  # fmt: skip
    """(tree, probs): the likeliest paths first (a node's probability: the share of
    occurrences that continue with its path), at most `budget` nodes, `width` children a
    node (the most frequent), `depth` levels, none below min_prob; parents before children."""
    out = TreeDraft(rule="topk")
    probs: list[float] = []
    heap: list = []  # (-prob, order, parent, token, level, its continuations)
    total, order = len(follows), 0

    def expand(node: int, level: int, live: list[list[int]]) -> None:
        nonlocal order
        groups: dict[int, list[list[int]]] = {}
        for f in live:
            if len(f) > level:
                groups.setdefault(f[level], []).append(f)
        if level >= depth or not groups:
            return
        q = torch.zeros(vocab, device=device)  # [V] the continuations' frequencies here
        for token, group in groups.items():
            q[token] = len(group)
        out.q[node] = q / q.sum()
        for token, group in sorted(groups.items(), key=lambda kv: -len(kv[1]))[:width]:
            if len(group) / total >= min_prob:
                heapq.heappush(heap, (-len(group) / total, order, node, token, level + 1, group))
                order += 1

    expand(-1, 0, follows)
    while heap and len(out.tokens) < budget:
        neg_prob, _, parent, token, level, group = heapq.heappop(heap)
        out.tokens.append(token)
        out.parents.append(parent)
        probs.append(-neg_prob)
        if token != eos:  # nothing after an end-of-text token can be emitted
            expand(len(out.tokens) - 1, level, group)
    with_children = set(out.parents)
    out.q = {node: q for node, q in out.q.items() if node in with_children}
    return out, probs


class SuffixCache:
    """The outputs of earlier requests: at most `limit` of them (and MAX_CACHE_TOKENS
    tokens), the oldest dropped first, kept in `path` (None: this process only)."""

    def __init__(self, path: Path | None, vocab: int, fingerprint: str, limit: int):
        self.path, self.vocab, self.fingerprint, self.limit = path, vocab, fingerprint, limit
        self.requests: list[list[int]] = []
        self.save_error: str | None = None  # why the file could not be written, if it could not
        self._seq: np.ndarray | None = None
        if path is not None and path.exists():
            self.requests = self._read(path)
            self._trim()

    def _read(self, path: Path) -> list[list[int]]:
        """The file's requests; ValueError naming the file (moved aside, so that the next
        run starts a fresh cache and nothing is lost) when it is not a cache of this
        tokenizer's."""
        try:
            resources.check_regular_file(path)
            if path.stat().st_size > MAX_FILE_BYTES:
                raise ValueError(f"larger than {MAX_FILE_BYTES >> 20} MiB")
            obj = json.loads(path.read_bytes())
            if type(obj) is not dict or obj.get("format") != FORMAT:
                raise ValueError(f"not a {FORMAT} file")
            if obj.get("tokenizer") != self.fingerprint:
                raise ValueError("written for another tokenizer")
            requests = obj.get("requests")
            if type(requests) is not list or not all(
                type(r) is list and all(type(t) is int and 0 <= t < self.vocab for t in r)
                for r in requests
            ):
                raise ValueError(f"its requests are not lists of token ids below {self.vocab}")
            return requests
        except (OSError, ValueError, RecursionError) as e:
            aside = path.with_name(path.name + ".bad")
            try:
                os.replace(path, aside)
                where = f"moved to {aside}; the next run starts a fresh cache"
            except OSError:
                where = "delete it, or pass --suffix-cache 0"
            raise ValueError(f"the suffix cache {path} is unreadable ({e}): {where}") from None

    def _trim(self) -> None:
        del self.requests[: max(0, len(self.requests) - self.limit)]
        while sum(map(len, self.requests)) > MAX_CACHE_TOKENS and self.requests:
            del self.requests[0]
        self._seq = None

    def add(self, output: list[int], replaces: list[int] | None = None) -> list[int]:
        """Cache one request's output (in place of `replaces`, the same session's earlier
        output, when it was continued), save the file; the list that was stored."""
        if replaces is not None:
            for i in range(len(self.requests) - 1, -1, -1):
                if self.requests[i] is replaces:
                    del self.requests[i]
                    break
        stored = list(output)
        if stored and self.limit > 0:
            self.requests.append(stored)
            self._trim()
            self.save()
        return stored

    def save(self) -> None:
        """Write the file atomically; on failure keep going in memory (save_error says why)."""
        if self.path is None:
            return
        tmp = self.path.with_name(self.path.name + ".tmp")
        body = {"format": FORMAT, "tokenizer": self.fingerprint, "requests": self.requests}
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp.write_text(json.dumps(body, separators=(",", ":")), encoding="utf-8")
            os.replace(tmp, self.path)
            self.save_error = None
        except OSError as e:
            self.save_error = f"{self.path}: {e.strerror or e}"

    @property
    def seq(self) -> np.ndarray:
        """Every cached request, SEP after each, as one array."""
        if self._seq is None:
            flat = [t for r in self.requests for t in (*r, SEP)]
            self._seq = np.array(flat, dtype=np.int64)
        return self._seq


_CACHES: dict[Path, SuffixCache] = {}  # one per file in a process: a sweep's runs share it
_OWN: contextvars.ContextVar = contextvars.ContextVar("suffix_own_cache", default=None)


@contextlib.contextmanager
def own_cache(store: dict, key: str):
    """Within: suffix drafters use store[key], a cache that starts empty and is never saved
    (bench: a configuration learns only from its own earlier questions, not from the file
    nor from other configurations' answers to the same question)."""
    token = _OWN.set((store, key))
    try:
        yield
    finally:
        _OWN.reset(token)


def shared_cache(vocab: int, fingerprint: str, limit: int) -> SuffixCache:
    """The process's cache for this tokenizer, read from <cache dir>/suffix/ the first time
    (within own_cache: that one)."""
    own = _OWN.get()
    if own is None:
        path = resources.cache_dir() / "suffix" / f"{fingerprint[:16]}.json"
        caches, key = _CACHES, path
    else:
        (caches, key), path = own, None
    cache = caches.get(key)
    if cache is None or cache.vocab != vocab:
        cache = caches[key] = SuffixCache(path, vocab, fingerprint, limit)
    cache.limit = limit
    cache._trim()
    return cache


class SuffixDrafter(Drafter):
    """Suffix decoding over this request and the cache of earlier outputs (module doc)."""

    kind = "suffix"

    def __init__(self, params: dict[str, Any], info: ModelInfo, vocab: int, eos: int | None,
                 cache: SuffixCache | None):  # fmt: skip
        self.params, self.info, self.vocab, self.eos, self.cache = params, info, vocab, eos, cache
        self.depth = params["suffix_depth"]
        self.spec_factor = float(params["suffix_spec_factor"])
        self.min_prob = float(params["suffix_min_prob"])
        self.device = torch.device(info.device)
        self._n_prompt = 0
        self._stored: list[int] | None = None  # this session's output, once cached

    def describe(self) -> dict[str, Any]:
        return {"kind": self.kind, **self.params}

    def prefill(self, ids, target_cache) -> None:
        self._n_prompt, self._stored = len(ids), None

    def finish(self, ids: list[int]) -> None:
        """The session ended: its output joins the cache (a continued session's replaces
        what it had put there)."""
        if self.cache is not None:
            self._stored = self.cache.add(ids[self._n_prompt :], replaces=self._stored)

    def _sources(self, ids: list[int]):
        yield "request", np.array(ids, dtype=np.int64)
        if self.cache is not None and self.cache.requests:
            yield "cache", self.cache.seq

    def _matches(self, ids: list[int], most: int):
        """(source, match length, match ends, its continuations, the token budget) for each
        source with a match; the budget is min(most, spec_factor x the match's length)."""
        for source, seq in self._sources(ids):
            m, ends = match_ends(seq, ids, self.depth)
            budget = min(most, math.floor(self.spec_factor * m + 1e-9))
            if m and budget >= 1:
                yield source, m, ends, continuations(seq, ends, budget), budget

    def find(self, ids: list[int], k: int):
        """(tokens, probs, cut, matched): the best source's chain (most expected tokens),
        or None without a match. cut: "k", "spec_factor", "min_prob", "eos" or "end"."""
        best = None
        for source, m, ends, follows, budget in self._matches(ids, k):
            tokens, probs, cut = best_chain(follows, budget, self.min_prob, self.eos)
            if cut == "length":
                cut = "k" if budget == k else "spec_factor"
            if tokens and (best is None or sum(probs) > sum(best[1])):
                matched = {"source": source, "length": m, "count": len(ends),
                           "probs": [round(p, 6) for p in probs], "cut": cut}  # fmt: skip
                best = tokens, probs, cut, matched
        return best

    def propose(self, ids, k, config, generator, keep_drafting) -> Proposal:
        found = self.find(ids, k) if k >= 1 else None
        if found is None:
            return Proposal.empty("no_match")
        tokens, probs, cut, matched = found
        stop = {"k": "k", "eos": "eos", "end": "no_match"}.get(cut, "threshold")
        if keep_drafting is not None:  # the threshold policy, on the path's probability
            for i, prob in enumerate(probs[:-1]):
                if not keep_drafting(prob):
                    tokens, stop = tokens[: i + 1], "threshold"
                    matched = {**matched, "probs": matched["probs"][: i + 1], "cut": "policy"}
                    break
        q = one_hot(tokens, self.vocab, self.device)
        return Proposal.chain(tokens, q, stop, {"matched": SuffixMatch.from_value(matched)})

    def propose_tree(self, ids, shape, config, generator) -> Proposal:
        """The best source's tree: at most tree_budget nodes (and spec_factor x the match's
        length), tree_width children a node, K levels."""
        best, best_score = TreeDraft(rule=shape.rule(config)), 0.0  # none: as the settings
        for source, m, ends, follows, budget in self._matches(ids, shape.budget):
            tree, probs = best_tree(follows, budget, shape.depth, shape.width, self.min_prob,
                                    self.eos, self.vocab, self.device)  # fmt: skip
            if tree.tokens and sum(probs) > best_score:
                tree.extras["matched"] = SuffixMatch(source, m, len(ends),
                                                     tuple(round(p, 6) for p in probs))  # fmt: skip
                best, best_score = tree, sum(probs)
        return best.proposal()  # nothing to cut after the round: it reads the context given

    def next_q(self, ids, config):
        """One-hot at the token the chain would draft first, None without a match."""
        found = self.find(ids, 1)
        if found is None:
            return None
        return one_hot_next(found[0][0], self.vocab)

    def measure_ms(self, ids: list[int], n_tokens: int) -> float:
        return ms_per_call(lambda: self.find(ids, 1), n_tokens)


def fingerprint(pair) -> str:
    """A hash of the target's vocabulary: a cache file serves only the tokenizer it was
    written with."""
    tokenizer = getattr(pair, "tokenizer", None)
    vocab = tokenizer.get_vocab() if hasattr(tokenizer, "get_vocab") else {}
    text = json.dumps([pair.vocab_size, sorted(vocab.items())], ensure_ascii=True)
    return hashlib.sha256(text.encode()).hexdigest()


def build(params, pair) -> SuffixDrafter:
    target = pair.target_info
    cache = None
    if params["suffix_cache"] > 0:
        cache = shared_cache(pair.vocab_size, fingerprint(pair), params["suffix_cache"])
    info = ModelInfo(name=f"suffix decoding (depth {params['suffix_depth']})", path="",
                     vocab_size=pair.vocab_size, params=0, dtype=target.dtype,
                     device=target.device)  # fmt: skip
    return SuffixDrafter(dict(params), info, pair.vocab_size, pair.eos_token_id, cache)
