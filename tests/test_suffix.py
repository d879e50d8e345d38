"""Suffix decoding (core.drafters.suffix): the match and its continuations on hand-made
text; exact as every drafter is (greedy equals the target's generate, whole sequences
follow p at T 1.5 and 0.7, chains and trees, the cross-request cache in use; the target's
cache equals a fresh forward); the cache file persists, is bounded, and a corrupt one is
named in one line and set aside; a round records what it matched and the trace keeps it."""

from __future__ import annotations

import json

import numpy as np
import pytest

from specviz.core.decoding.k_policy import PolicyConfig
from specviz.core.decoding.warp import SamplingConfig
from specviz.core.drafters import suffix
from specviz.core.drafters.registry import DrafterConfig, make_drafter
from specviz.core.engine.speculative import SpeculativeEngine
from specviz.core.trace.check_session import check_session
from specviz.core.trace.files import load, save
from specviz.core.trace.records import Settings
from specviz.core.trace.session import Session
from specviz.gui import palette
from tests.test_drafters import (
    LEVEL,
    N_RUNS,
    PROMPTS,
    fresh_logits,
    greedy_reference,
    looping_prompt,
    probe,
    run_sequences,
    sequence_pvalue,
    target_only,
)
from tests.test_gui_drafting import quiet, step, window  # noqa: F401 (fixtures)
from tests.test_tree_engine import tree_settings

SUFFIX = DrafterConfig("suffix")
CONSTANT = PolicyConfig("constant")


@pytest.fixture(autouse=True)
def cache_folder(monkeypatch, tmp_path):
    """Each test its own cache folder and a process with no cache read yet."""
    monkeypatch.setenv("SPECVIZ_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(suffix, "_CACHES", {})
    return tmp_path / "cache" / "suffix"


A, B, C, X, Y = 1, 2, 3, 7, 8


def test_the_longest_suffix_with_a_continuation_and_its_votes():
    seq = np.array([A, B, C, X, A, B, C, Y, A, B, C, X, A, B, C])
    m, ends = suffix.match_ends(seq, seq.tolist(), depth=24)
    # The longest suffix seen before with something after it: "a b c x a b c" (then y).
    assert m == 7 and ends.tolist() == [6]
    m, ends = suffix.match_ends(seq, seq.tolist(), depth=3)  # at most 3 tokens: "a b c"
    assert m == 3 and ends.tolist() == [2, 6, 10]
    follows = suffix.continuations(seq, ends, 2)
    assert follows == [[X, A], [Y, A], [X, A]]  # most recent first
    tokens, probs, cut = suffix.best_chain(follows, 2, 0.1, eos=None)
    assert tokens == [X, A] and probs == pytest.approx([2 / 3, 2 / 3]) and cut == "length"
    tokens, _, cut = suffix.best_chain(follows, 2, 0.7, eos=None)
    assert tokens == [] and cut == "min_prob"
    tokens, _, cut = suffix.best_chain(follows, 2, 0.1, eos=X)
    assert tokens == [X] and cut == "eos"


def test_no_match_crosses_a_request_boundary():
    seq = np.array([A, B, suffix.SEP, C, A, B, suffix.SEP])
    m, ends = suffix.match_ends(seq, [C, A, B], depth=24)
    assert m == 0 and len(ends) == 0  # "a b" occurs twice but nothing follows either


def test_a_tree_takes_the_likeliest_paths_first():
    follows = [[X, A], [Y, B], [X, A], [X, C]]
    tree, probs = suffix.best_tree(follows, 4, 2, 2, 0.1, None, 10, "cpu")
    assert tree.tokens == [X, A, Y, C] and tree.parents == [-1, 0, -1, 0]
    assert probs == pytest.approx([0.75, 0.5, 0.25, 0.25]) and tree.rule == "topk"
    assert tree.q[-1][X] == pytest.approx(0.75) and set(tree.q) == {-1, 0}


def session_tokens(pair, drafter, settings, prompt):
    engine = SpeculativeEngine(pair, settings, drafter=drafter, trace=False)
    header = engine.prefill(prompt, calibrate=False)
    rounds = list(engine.run())
    return header, rounds, [t.id for r in rounds for t in r.tokens if t.emitted]


@pytest.mark.parametrize("width", [1, 3], ids=["chain", "tree"])
def test_greedy_equals_target_generate(pair, width):
    used = target_only(pair)
    for prompt in PROMPTS:
        settings = Settings(k=6, temperature=0, max_new_tokens=24, tree_width=width)
        header, rounds, ours = session_tokens(used, SUFFIX, settings, prompt)
        assert ours == greedy_reference(pair.target, list(header.prompt_ids), 24, pair.eos_token_id)
        assert any(r.n_accepted for r in rounds)  # it drafted, and was right
    # The second prompt's session read the first's output from the cache.
    assert [len(c.requests) for c in suffix._CACHES.values()] == [2]


@pytest.mark.parametrize("temperature", [1.5, 1.0, 0.7])
def test_emitted_sequences_follow_p(pair, temperature):
    """Short sessions from one looping prompt, each session's output joining the cache the
    next ones draft from: whole sequences follow the target's p."""
    used, prompt_ids = target_only(pair), looping_prompt(pair)
    sampling = SamplingConfig(temperature=temperature)
    sequences, statuses = run_sequences(used, SUFFIX, CONSTANT, 1, N_RUNS, 3, prompt_ids,
                                        seed=1, sampling=sampling)  # fmt: skip
    assert {"accepted", "rejected", "resampled", "bonus"} <= {s for r in statuses for s in r}
    assert sequence_pvalue(pair, prompt_ids, sequences, sampling) > LEVEL


def test_the_sequence_test_catches_a_wrong_residual_here(pair, monkeypatch):
    """Power, at this size: resampling from p (x let back in) instead of p without x."""
    from specviz.core.decoding import verify

    monkeypatch.setattr(verify, "residual_distribution", lambda p, q: p.double() / p.double().sum())
    used, prompt_ids = target_only(pair), looping_prompt(pair)
    sequences, _ = run_sequences(used, SUFFIX, CONSTANT, 1, N_RUNS, 3, prompt_ids, seed=1)
    assert sequence_pvalue(pair, prompt_ids, sequences) < LEVEL


def branching_prompt(pair) -> list[int]:
    """ "a b c" three times, followed each time by another of the target's likeliest next
    tokens, then "a b c": a suffix tree's root gets three children."""
    import torch

    base = pair.tokenizer("the cat and")["input_ids"][:3]
    x, y, z = torch.topk(fresh_logits(pair.target, base, pair.vocab_size), 3).indices.tolist()
    return [*base, x, *base, y, *base, z, *base]


def test_tree_sessions_follow_p(pair):
    import torch

    used, prompt_ids = target_only(pair), branching_prompt(pair)
    settings = tree_settings(2, width=3, budget=8, max_new_tokens=3, temperature=1.5)
    drafter = DrafterConfig("suffix", suffix_spec_factor=4.0)
    engine = SpeculativeEngine(used, settings, trace=False, drafter=drafter)
    gen = torch.Generator().manual_seed(3)
    sequences, fates, widest = [], set(), 0
    for _ in range(N_RUNS):
        engine.prefill("", prompt_ids=prompt_ids, calibrate=False)
        engine.generator = gen
        rounds = list(engine.run())
        sequences.append(tuple(t.id for r in rounds for t in r.tokens if t.emitted))
        fates.update(f for r in rounds for f in (*r.tree.fate, *(t.status for t in r.tokens)))
        widest = max([widest, *(r.tree.parent.count(-1) for r in rounds)])
    assert {"accepted", "rejected", "discarded", "resampled", "bonus"} <= fates
    assert widest == 3  # trees, not chains
    assert sequence_pvalue(pair, prompt_ids, sequences, SamplingConfig(1.5)) > LEVEL


def test_the_target_cache_equals_a_fresh_forward_and_rounds_record_the_match(pair, tmp_path):
    used = target_only(pair)
    engine = SpeculativeEngine(used, Settings(k=4, seed=3, max_new_tokens=60), drafter=SUFFIX)
    session = Session(engine.prefill(PROMPTS[1], calibrate=False))
    for rnd in engine.run(max_rounds=15):
        session.append(rnd)
        ids = list(engine.ids)
        assert engine.t_cache.get_seq_length() == len(ids) - 1
        cached = probe(pair.target, engine.t_cache, ids, pair.vocab_size)
        torch_close(cached, fresh_logits(pair.target, ids, pair.vocab_size))
    matched = [r for r in session.rounds if r.matched]
    assert matched and all(r.n_drafted == len(r.matched.probs) for r in matched)
    assert all(r.matched.source == "request" and r.matched.count >= 1 for r in matched)
    unmatched = [r for r in session.rounds if not r.matched]
    assert all(r.n_drafted == 0 and r.stop in ("no_match", "limit") for r in unmatched)
    assert check_session(session) == []
    save(session, tmp_path / "s.jsonl")
    assert [r.matched for r in load(tmp_path / "s.jsonl").rounds] == [
        r.matched for r in session.rounds
    ]


def torch_close(a, b):
    import torch

    torch.testing.assert_close(a, b, atol=1e-4, rtol=1e-4)


def test_a_match_in_a_trace_is_checked(pair, tmp_path):
    from specviz.core.trace.parse import parse_round as round_from_json
    from specviz.core.trace.records import TraceError

    line = {"type": "round", "session_id": "s", "index": 0, "context_len": 4, "draft_ms": 1.0,
            "verify_ms": 1.0, "n_drafted": 0, "n_accepted": 0, "tokens": []}  # fmt: skip
    good = {"source": "cache", "length": 3, "count": 2, "probs": [0.5], "cut": "k"}
    assert round_from_json({**line, "matched": good}, "s", 2).matched.to_json() == good
    for bad in ({**good, "source": "elsewhere"}, {**good, "probs": [2.0]},
                {**good, "length": 0}, {**good, "extra": 1}, {"source": "cache"}):  # fmt: skip
        with pytest.raises(TraceError, match="matched"):
            round_from_json({**line, "matched": bad}, "s", 2)


def test_the_cache_file_persists_across_processes_and_stays_bounded(pair, cache_folder):
    used = target_only(pair)
    drafter = DrafterConfig("suffix", suffix_cache=2)
    for prompt in ("the cat and the dog", "A fool and his money", "the cat sat"):
        session_tokens(used, drafter, Settings(k=4, max_new_tokens=6), prompt)
    (path,) = cache_folder.glob("*.json")
    stored = json.loads(path.read_text())["requests"]
    assert len(stored) == 2 and all(len(r) == 6 for r in stored)  # the last two outputs
    suffix._CACHES.clear()  # a new process reads the file
    fresh = make_drafter(drafter, used)
    assert fresh.cache.requests == stored
    assert make_drafter(DrafterConfig("suffix", suffix_cache=0), used).cache is None


@pytest.mark.parametrize("body", [b"{not json", b'{"format": "other"}', json.dumps(
    {"format": suffix.FORMAT, "tokenizer": "?", "requests": []}).encode()],
    ids=["broken", "foreign", "other-tokenizer"])  # fmt: skip
def test_a_corrupt_cache_is_named_in_one_line_and_set_aside(pair, cache_folder, body):
    used = target_only(pair)
    cache_folder.mkdir(parents=True)
    path = cache_folder / f"{suffix.fingerprint(used)[:16]}.json"
    path.write_bytes(body)
    with pytest.raises(ValueError) as raised:
        make_drafter(SUFFIX, used)
    message = str(raised.value)
    assert str(path) in message and "\n" not in message and "fresh cache" in message
    assert (cache_folder / (path.name + ".bad")).read_bytes() == body  # nothing lost
    assert make_drafter(SUFFIX, used).cache.requests == []  # the next run starts fresh


def test_hostile_token_ids_are_refused(pair, cache_folder):
    used = target_only(pair)
    cache_folder.mkdir(parents=True)
    path = cache_folder / f"{suffix.fingerprint(used)[:16]}.json"
    bad = [[0, used.vocab_size]], [[-1]], [["1"]], [[True]], "x"
    for requests in bad:
        body = {
            "format": suffix.FORMAT,
            "tokenizer": suffix.fingerprint(used),
            "requests": requests,
        }
        path.write_text(json.dumps(body))
        suffix._CACHES.clear()
        with pytest.raises(ValueError, match="token ids below"):
            make_drafter(SUFFIX, used)


def test_an_unwritable_cache_loses_nothing_else(pair, cache_folder):
    used = target_only(pair)
    cache_folder.parent.mkdir(parents=True)
    cache_folder.write_text("a file where the folder should be")
    _, rounds, tokens = session_tokens(used, SUFFIX, Settings(k=4, max_new_tokens=8), "the cat")
    (cache,) = suffix._CACHES.values()
    assert len(tokens) == 8 and cache.requests == [tokens] and cache.save_error


def test_the_command_line_refuses_a_corrupt_cache_with_exit_2(capsys, pair, pair_dirs,
                                                              cache_folder):  # fmt: skip
    from specviz.cli.main import main

    target, _ = pair_dirs
    cache_folder.mkdir(parents=True)
    fp = suffix.fingerprint(target_only(pair))
    (cache_folder / f"{fp[:16]}.json").write_text("[]")
    code = main(["run", "--target", str(target), "--drafter", "suffix", "--prompt", "a b",
                 "--max-new-tokens", "4", "--quiet"])  # fmt: skip
    err = [line for line in capsys.readouterr().err.splitlines() if "[specviz]" not in line]
    assert code == 2 and len(err) == 1 and "suffix cache" in err[0], err  # one line


def test_bad_parameters_exit_2_before_loading(capsys):
    from specviz.cli.main import main

    for args in (["--suffix-min-prob", "1.5"], ["--suffix-spec-factor", "-1"],
                 ["--suffix-cache", "-1"], ["--suffix-depth", "0"]):  # fmt: skip
        code = main(["run", "--target", "/nowhere", "--drafter", "suffix", *args])
        assert code == 2 and "suffix" in capsys.readouterr().err.lower()


def test_tune_exports_vllms_suffix_fields():
    from specviz.cli.tune.export_config import Best, vllm_config

    params = DrafterConfig("suffix", suffix_min_prob=0.2).values()
    config = vllm_config(Best("suffix", params, "constant", 0.5, 12, "token", None))
    assert config == {
        "num_speculative_tokens": 12,
        "method": "suffix",
        "suffix_decoding_max_tree_depth": 24,
        "suffix_decoding_max_spec_factor": 1.0,
        "suffix_decoding_min_token_prob": 0.2,
        "suffix_decoding_max_cached_requests": 10000,
    }


def test_the_window_shows_what_a_round_matched(qtbot, window):  # noqa: F811
    box = window.controls.drafting_box
    box.drafter_combo.setCurrentIndex(box.drafter_combo.findData("suffix"))
    assert box.param_spins["suffix_min_prob"].isEnabled()
    assert not box.param_spins["ngram_max"].isEnabled()
    assert box.drafting()[0].param("suffix_min_prob") == 0.1  # a number, not 0.1000000001
    step(qtbot, window, 4)
    session = window.session
    assert session.header.drafter["kind"] == "suffix"
    rnd = next(r for r in session.rounds if r.matched is not None)
    window.select_round(rnd.index)
    view = window.stream.view
    matched = [s for s in view.extraSelections()
               if s.format.background().color().name() == palette.COPIED]  # fmt: skip
    assert len(matched) == rnd.matched.length  # the context's last tokens, in blue
    label = window.stream.round_label.text()
    assert f"suffix match: the last {rnd.matched.length} tokens" in label
    assert f"seen {rnd.matched.count}x" in label
    assert "this path's probability" in view.tooltip_at((rnd.index, 0))


def test_a_sweep_gives_trees_to_the_drafters_that_draft_them():
    from specviz.core.tune.sweep import SweepConfig

    lookup = DrafterConfig("lookup")
    config = SweepConfig(variants=((lookup, None), (SUFFIX, None)), verifiers=("token", "tree3x16"))
    assert [(d.kind, v) for d, _, v in config.combos()] == [
        ("lookup", "token"), ("suffix", "token"), ("suffix", "tree3x16")]  # fmt: skip
    alone = SweepConfig(drafter=lookup, verifier="tree3x16")  # asked for: refused at the run
    assert [v for _, _, v in alone.combos()] == ["tree3x16"]


def test_tune_says_when_runs_of_one_prompt_share_the_cache(capsys):
    from specviz.cli.tune.tune import _note_shared_cache
    from specviz.core.tune.sweep import SweepConfig

    _note_shared_cache(SweepConfig(drafter=SUFFIX, ks=(2, 4)))
    assert "--suffix-cache 0" in capsys.readouterr().err
    for quiet_config in (SweepConfig(drafter=SUFFIX, ks=(4,)),
                         SweepConfig(drafter=DrafterConfig("suffix", suffix_cache=0), ks=(2, 4)),
                         SweepConfig(drafter=DrafterConfig("lookup"), ks=(2, 4))):  # fmt: skip
        _note_shared_cache(quiet_config)
        assert capsys.readouterr().err == ""
