"""A round's rule numbers: what a block round (schema 1.3) and a typical round (schema 1.4)
record beside their tokens, read from a line (structure) and checked against the tokens
(meaning). The rules themselves are core.decoding.block and core.decoding.typical. And, schema
1.6, a greedy half-precision round's difference from the target alone, read from a line and put
in words; schema 1.8, a bridged round's draft pieces (core.drafters.recut), read, checked and
grouped where the cuts differ.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from specviz.core.trace import verifiers
from specviz.core.trace.records import MAX_K, Round, TraceError

Found = Iterator[tuple[str, str]]  # (field, message)
_JUDGED = ("accepted", "rejected")


def _numbers(value: dict[str, Any], keys: tuple[str, ...], line: int, rule: str) -> dict:
    """{key: [floats in [0, 1]]}, each list at most MAX_K long, all of one length."""
    out = {}
    for key in keys:
        numbers = value.get(key)
        name = f"{rule}.{key}"
        if type(numbers) is not list or len(numbers) > MAX_K:
            raise TraceError(f"expected a list of at most {MAX_K} numbers", line, name)
        for i, v in enumerate(numbers):
            if type(v) not in (int, float) or not 0 <= v <= 1:
                raise TraceError(f"{v!r}: not a number in [0, 1]", line, f"{name}[{i}]")
        out[key] = [float(v) for v in numbers]
    if len({len(v) for v in out.values()}) != 1:
        raise TraceError(f"{', '.join(keys)} must have one entry per position", line, rule)
    return out


def parse_block(value: dict[str, Any] | None, line: int) -> dict[str, Any] | None:
    """A block round's numbers: {"weights", "h", "u"}, one number in [0, 1] per drafted
    position."""
    return None if value is None else _numbers(value, ("weights", "h", "u"), line, "block")


def parse_typical(value: dict[str, Any] | None, line: int) -> dict[str, Any] | None:
    """A typical round's numbers: {"threshold"}, one number in [0, 1] per judged position."""
    return None if value is None else _numbers(value, ("threshold",), line, "typical")


def check_block(rnd: Round) -> Found:
    """A block round (core.decoding.block): its numbers cover the drafted tokens, the kept
    prefix is the largest i with u_i < h_i, the judged tokens' draws are the block's, and
    the weights follow p_i = min(1, p_{i-1} p(x_i) / q(x_i)) over them."""
    block = rnd.block
    if rnd.settings is not None and rnd.settings.verifier != "block":
        yield "block", "block numbers in a round not verified as a block"
        return
    if block is None:
        if rnd.n_drafted:
            yield "block", "a block round without its block numbers"
        return
    weights, h, u = block["weights"], block["h"], block["u"]
    if len(u) != rnd.n_drafted:
        yield "block", f"{len(u)} positions for {rnd.n_drafted} drafted tokens"
        return
    tau = max((i + 1 for i in range(len(u)) if u[i] < h[i]), default=0)
    if tau != rnd.n_accepted:
        yield "block.u", f"the block keeps {tau} drafts (the last u_i < h_i), not {rnd.n_accepted}"
    running = 1.0
    for i, t in enumerate(t for t in rnd.tokens if t.status in _JUDGED):
        if t.u is not None and t.u != u[i]:
            yield f"block.u[{i}]", f"{u[i]!r}, but the token's draw is {t.u!r}"
        if t.p is not None and t.q is not None and t.q > 0:
            running = min(1.0, running * t.p / t.q)
            if abs(running - weights[i]) > 1e-6 * max(running, 1e-12) + 1e-12:
                yield f"block.weights[{i}]", f"{weights[i]!r}, but p_i = {running!r}"


def check_typical(rnd: Round) -> Found:
    """A typical round (core.decoding.typical): one threshold per judged token, an
    accepted token's p above its threshold and a rejected one's not."""
    typical = rnd.typical
    if rnd.settings is not None and rnd.settings.verifier != "typical":
        yield "typical", "typical numbers in a round not verified by the typical rule"
        return
    judged = [t for t in rnd.tokens if t.status in _JUDGED]
    if typical is None:
        if judged:
            yield "typical", "a typical round without its thresholds"
        return
    threshold = typical["threshold"]
    if len(threshold) != len(judged):
        yield "typical", f"{len(threshold)} thresholds for {len(judged)} judged tokens"
        return
    for i, t in enumerate(judged):
        if t.p is None:
            continue  # named by the token's own checks
        kept = t.p > threshold[i]
        if kept != (t.status == "accepted"):
            relation = ">" if t.p > threshold[i] else "<="
            yield (
                f"typical.threshold[{i}]",
                f"p {t.p!r} {relation} threshold {threshold[i]!r}, but the token is '{t.status}'",
            )


def token_wise_stop(rnd: Round) -> int | None:
    """Under a rule other than token-wise (block, typical): the judged position at which the
    token-wise rule, with the round's own draws u and min(1, p/q), would have stopped (the
    first u >= accept_prob), or None if it would have kept every judged draft too. The
    accepted tokens from there on are what the rule kept beyond it."""
    judged = [t for t in rnd.tokens if t.status in _JUDGED]
    for i, t in enumerate(judged):
        if t.u is not None and t.accept_prob is not None and not t.u < t.accept_prob:
            return i
    return None


def kept_beyond_token_stop(rnd: Round) -> set[int]:
    """Indexes into rnd.tokens of the accepted drafts the token-wise rule, with the same
    draws, would not have kept (empty for a token-wise round)."""
    if rnd.settings is None or verifiers.token_fates(rnd.settings.verifier):
        return set()
    stop = token_wise_stop(rnd)
    if stop is None:
        return set()
    judged = [j for j, t in enumerate(rnd.tokens) if t.status in _JUDGED]
    return {j for j in judged[stop:] if rnd.tokens[j].status == "accepted"}


# A greedy_diff's fields (core.decoding.greedy_check.GreedyDiff); pass_tokens may be absent.
GREEDY_DIFF = {"position": int, "ours": int, "theirs": int, "text_ours": str,
               "text_theirs": str, "logit_ours": float, "logit_theirs": float,
               "pass_tokens": int}  # fmt: skip


def parse_greedy_diff(value: dict[str, Any] | None, line: int) -> dict[str, Any] | None:
    """Where a greedy session left the target alone's text: each field of its type."""
    if value is None:
        return None
    out: dict[str, Any] = {}
    for key, kind in GREEDY_DIFF.items():
        v = value.get(key)
        if v is None and key == "pass_tokens":
            continue
        ok = type(v) is kind or kind is float and type(v) is int
        if not ok or kind is not str and v != v:  # NaN is no logit
            raise TraceError(f"expected {kind.__name__}", line, f"greedy_diff.{key}")
        out[key] = float(v) if kind is float else v
    return out


NEAR_TIE = 0.25  # logits closer than this: a rounding apart (bf16 keeps ~3 digits of a logit)


def greedy_diff_text(diff: dict[str, Any], dtype: str | None = None) -> str:
    """A round's greedy_diff in words: where the text left the target alone's, the two
    tokens, the target's logit margin there and why a near-tie can flip."""
    margin = diff["logit_theirs"] - diff["logit_ours"]
    tie = "an exact tie" if margin == 0 else "a near-tie" if margin < NEAR_TIE else "not a tie"
    n = diff.get("pass_tokens")
    why = (
        f"a pass of {n} tokens rounds differently from a pass of 1"
        if n and n > 1
        else "the pass was of 1 token: the rounding of earlier passes, kept in the cache"
    )
    where = f" in {dtype}" if dtype else ""
    return (
        f"the text leaves the target alone's greedy decoding{where} at generated token "
        f"{diff['position'] + 1}: {tie}: {margin:.3g} between {diff['text_theirs']!r} (the "
        f"target alone) and {diff['text_ours']!r} (this session); {why}"
    )


MAX_PIECE_TEXT = 1000  # characters of one draft piece's text (one token's), at most


def parse_draft_pieces(value: dict[str, Any] | None, line: int) -> dict[str, Any] | None:
    """A bridged round's `draft_pieces` (records.Round.draft_pieces): at most MAX_K pieces,
    each a token id >= 0, a text of at most MAX_PIECE_TEXT characters and a [start, end]
    range of the round's drafted tokens, the ranges in order."""
    if value is None:
        return None
    where = "draft_pieces"
    if set(value) != {"ids", "text", "target"}:
        raise TraceError("expected the fields ids, text, target", line, where)
    ids, text, target = value["ids"], value["text"], value["target"]
    for name, v in (("ids", ids), ("text", text), ("target", target)):
        if type(v) is not list or len(v) > MAX_K:
            raise TraceError(f"expected a list of at most {MAX_K}", line, f"{where}.{name}")
    if not len(ids) == len(text) == len(target):
        raise TraceError("ids, text and target must have one entry per piece", line, where)
    if not all(type(i) is int and i >= 0 for i in ids):
        raise TraceError("expected token ids (integers >= 0)", line, f"{where}.ids")
    if not all(type(t) is str and len(t) <= MAX_PIECE_TEXT for t in text):
        raise TraceError(f"expected texts of at most {MAX_PIECE_TEXT} characters", line,
                         f"{where}.text")  # fmt: skip
    last = [0, 0]
    for i, span in enumerate(target):
        if (type(span) is not list or len(span) != 2 or not all(type(x) is int for x in span)
                or not last[0] <= span[0] <= span[1] or span[1] < last[1]):  # fmt: skip
            raise TraceError("expected a [start, end] range, 0 <= start <= end, after the "
                             "one before", line, f"{where}.target[{i}]")  # fmt: skip
        last = span
    return {"ids": list(ids), "text": list(text), "target": [list(s) for s in target]}


def check_draft_pieces(rnd: Round, draft_vocab: int) -> Found:
    """A bridged round's pieces (their form checked by parse_draft_pieces) hold ids of the
    draft's vocabulary and ranges within the round's drafted tokens, of a chain."""
    pieces = rnd.draft_pieces
    if pieces is None:
        return
    if rnd.tree is not None:
        yield "draft_pieces", "in a token tree's round (a bridged draft drafts chains)"
    ids = pieces["ids"]
    bad = next((i for i, x in enumerate(ids) if not 0 <= x < draft_vocab), None)
    if bad is not None:
        yield (f"draft_pieces.ids[{bad}]",
               f"{ids[bad]} is not a draft token id (0 to {draft_vocab - 1})")  # fmt: skip
    end = max((span[1] for span in pieces["target"]), default=0)
    if end > rnd.n_drafted:
        yield "draft_pieces.target", f"reaches token {end}, but the round drafted {rnd.n_drafted}"


def cut_groups(pieces: dict[str, Any], n_drafted: int) -> list[tuple[int, int, int, int]]:
    """A bridged round's draft pieces and drafted tokens in groups that cover the same
    text, in order: (first piece, end piece, first token, end token). The two cuts agree on
    a group of one piece and one token and differ on any other: several on either side, a
    piece without a token (past what the round proposed) or a token without a piece (the
    end-of-text the bridge adds). Every piece and every drafted token is in one group;
    ranges past n_drafted (a trace not checked) are cut to it."""
    spans = [(min(max(a, 0), n_drafted), min(max(b, 0), n_drafted)) for a, b in pieces["target"]]
    groups: list[tuple[int, int, int, int]] = []
    done = i = 0  # tokens grouped so far; the next piece
    while i < len(spans):
        start = max(spans[i][0], done)
        end = max(spans[i][1], start)
        j = i + 1
        while j < len(spans) and spans[j][0] < end:  # shares a token with the group
            end = max(end, spans[j][1])
            j += 1
        if start > done:  # tokens no piece covers
            groups.append((i, i, done, start))
        groups.append((i, j, start, end))
        done, i = end, j
    if done < n_drafted:
        groups.append((len(spans), len(spans), done, n_drafted))
    return groups
