"""The multi-draft rule at one position (core.lab.multidraft, a token tree's node): W
children from q, SpecInfer's residual chain (sample) and EAGLE's zero-and-renormalise (topk)
follow p by a chi-square at the lab's level; the wrong variants (no residual update between
siblings, a stale residual) are rejected from W = 2 on, and equal the right rule at W = 1."""

from __future__ import annotations

import pytest

from specviz.core.lab.multidraft import run_multidraft

P = (0.4, 0.3, 0.15, 0.1, 0.05)
Q = (0.05, 0.1, 0.2, 0.3, 0.35)  # a draft that prefers what the target does not
N = 100_000


@pytest.mark.parametrize("width", [1, 2, 4])
@pytest.mark.parametrize("rule", ["sample", "topk"])
def test_the_exact_rules_follow_p(rule, width):
    result = run_multidraft(rule, P, Q, width, N, seed=width)
    assert result.lossless and result.p_value > 1e-3, result


@pytest.mark.parametrize("rule", ["no-update", "stale-residual"])
def test_the_wrong_variants_fail_from_two_children(rule):
    assert run_multidraft(rule, P, Q, 2, N, seed=0).p_value < 1e-6
    one, right = (run_multidraft(r, P, Q, 1, N, seed=0) for r in (rule, "sample"))
    assert (one.p_value, one.tv) == (right.p_value, right.tv)  # one child: the same rule


def test_more_children_keep_a_draft_more_often():
    rates = [run_multidraft("sample", P, Q, w, N, seed=0).accepted_rate for w in (1, 2, 4)]
    assert rates[0] < rates[1] < rates[2]


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="unknown rule"):
        run_multidraft("greedy", P, Q, 2, N)
    with pytest.raises(ValueError, match="width 1..5"):
        run_multidraft("sample", P, Q, 9, N)
    with pytest.raises(ValueError, match="one length"):
        run_multidraft("sample", P, Q[:3], 2, N)


def test_the_lab_command_runs_every_multidraft_rule(capsys):
    import json

    from specviz.cli.main import main

    args = ["lab", "--p", "0.4,0.3,0.15,0.1,0.05", "--q", "0.05,0.1,0.2,0.3,0.35"]
    assert main([*args, "--width", "3", "--samples", "100000", "--json"]) == 0
    rules = {r["rule"]: r for r in json.loads(capsys.readouterr().out)["rules"]}
    assert rules["sample"]["lossless_at_0.001"] and rules["topk"]["lossless_at_0.001"]
    assert rules["no-update"]["wrong"] and not rules["no-update"]["lossless_at_0.001"]
    assert main([*args, "--width", "3", "--k", "2"]) == 2
