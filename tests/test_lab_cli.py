"""`specviz lab`: the figures as text and JSON, the wrong rules, bad input, a model pair."""

from __future__ import annotations

import json

import pytest

from specviz.cli.main import main

KEYS = {"alpha", "residual", "acceptance_rate", "empirical", "tv", "chi2", "p_value"}
SEEDS = ["--p", "0.5,0.1,0.1,0.3", "--q", "0.2,0.4,0.3,0.1"]


def lab_json(capsys, *args: str) -> dict:
    assert main(["lab", *args, "--json"]) == 0
    out = capsys.readouterr().out
    assert len(out.strip().splitlines()) == 1
    return json.loads(out)


def test_json_of_the_seeds_example(capsys):
    obj = lab_json(capsys, *SEEDS, "--samples", "200000", "--seed", "0")
    assert KEYS <= obj.keys()
    assert obj["alpha"] == pytest.approx(0.5)
    assert obj["residual"] == pytest.approx([0.6, 0.0, 0.0, 0.4])
    assert obj["labels"] == ["A", "B", "C", "D"]
    assert obj["samples"] == 200_000 and sum(obj["counts"]) == 200_000
    assert obj["empirical"] == pytest.approx([0.5, 0.1, 0.1, 0.3], abs=0.005)
    assert obj["acceptance_rate"] == pytest.approx(0.5, abs=0.005)
    assert obj["p_value"] > 0.001 and obj["tv"] < 0.01 and obj["dof"] == 3
    assert obj["rule"] == "correct" and not obj["rejects_at_0.001"]


def test_defaults_are_the_seeds_example(capsys):
    obj = lab_json(capsys, "--samples", "1000")
    assert obj["p"] == pytest.approx([0.5, 0.1, 0.1, 0.3])
    assert obj["q"] == pytest.approx([0.2, 0.4, 0.3, 0.1])


@pytest.mark.parametrize("rule", ["naive-reject", "resample-from-p"])
def test_wrong_rules_are_rejected(capsys, rule):
    obj = lab_json(capsys, "--rule", rule, "--samples", "200000", "--seed", "0")
    assert obj["p_value"] < 0.001 and obj["rejects_at_0.001"]
    assert obj["rule_label"].startswith("WRONG")


def test_text_output(capsys):
    assert main(["lab", "--samples", "20000", "--p", "1,1", "--q", "3,1"]) == 0
    out = capsys.readouterr().out
    assert "alpha = sum min(p, q) = 0.7500" in out
    for word in ("residual", "acceptance rate", "TV distance", "chi-square", "p-value"):
        assert word in out
    assert "\nA " in out and "\nB " in out


@pytest.mark.parametrize(
    "args, message",
    [
        (["--p", "0.5,-0.1,0.6", "--q", "0.3,0.3,0.4"], "negative"),
        (["--p", "0.5,0.5", "--q", "0.3,0.3,0.4"], "same length"),
        (["--p", "0,0", "--q", "1,1"], "no mass"),
        (["--p", "a,b", "--q", "1,1"], "numbers"),
        (["--samples", "99"], "between 100 and 1,000,000"),
        (["--samples", "1000001"], "between 100 and 1,000,000"),
        (["--p", "1,1", "--q", "1,1", "--labels", "x"], "names"),
    ],
)
def test_bad_input_exits_2(capsys, args, message):
    assert main(["lab", *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("specviz: error:") and message in err


def test_model_mode(capsys, pair_dirs):
    target, draft = pair_dirs
    args = ["--target", str(target), "--draft", str(draft), "--prompt", "In the beginning"]
    obj = lab_json(capsys, *args, "--samples", "20000", "--temperature", "0.8")
    assert KEYS <= obj.keys()
    assert len(obj["p"]) == len(obj["empirical"]) == len(obj["residual"]) > 100
    assert obj["p_value"] > 0.001 and len(obj["top"]) >= 20
    assert main(["lab", *args, "--p", "1,1"]) == 2  # numbers or a pair, not both
    assert "not both" in capsys.readouterr().err


def test_token_texts_are_escaped_on_the_terminal(capsys):
    """A tokenizer's (or --labels') control characters never reach the terminal raw."""
    from specviz.cli.main import main

    assert main(["lab", "--labels", "a\x1b[31m,b,c,d", "--samples", "1000"]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "a\\x1b[31m" in out
