"""`specviz bench`: question files (and their hostile forms), configuration parsing through
the drafter registry, the table's definitions on known runs, greedy identity, multi-turn,
and the command's outputs on the built-in tiny pair."""

from __future__ import annotations

import dataclasses
import json

import pytest

from specviz.cli.main import main
from specviz.core.bench.questions import (
    MAX_QUESTIONS,
    Question,
    QuestionFileError,
    load_questions,
    shipped_questions,
)
from specviz.core.bench.results import (
    TARGET,
    BenchConfig,
    BenchResult,
    BenchSettings,
    QuestionRun,
    RoundFigures,
    TurnRun,
    first_difference,
)
from specviz.core.bench.runs import bench_plan, parse_configs, run_bench
from specviz.core.bench.table import bench_rows, question_lines, rows_from_json
from specviz.core.drafters import registry
from specviz.core.drafters.registry import DrafterConfig
from specviz.core.trace.records import Settings

SPEC_BENCH = (
    '{"question_id": 81, "category": "writing", "turns": ["Compose a poem.", "Shorten it."]}\n'
    '{"question_id": 161, "category": "translation", "turns": ["Translate: Bonjour"]}\n'
)
SPEED_BENCH = (
    '{"question_id": "a1", "category": "qa", "sub_category": "science", "turns": ["Why?"], '
    '"source": "x", "src_id": 3, "difficulty": "easy", "multiturn": false}\n'
)


def test_question_files_of_each_benchmark(tmp_path):
    path = tmp_path / "question.jsonl"
    path.write_text(SPEC_BENCH + SPEED_BENCH, encoding="utf-8")
    questions = load_questions(path)
    assert questions == [
        Question("81", "writing", ("Compose a poem.", "Shorten it.")),
        Question("161", "translation", ("Translate: Bonjour",)),
        Question("a1", "qa", ("Why?",), "science"),
    ]
    assert load_questions(path, limit=1) == questions[:1]


def test_the_shipped_set_has_six_categories():
    questions = load_questions(shipped_questions())
    cats = [q.category for q in questions]
    assert list(dict.fromkeys(cats)) == [
        "writing", "translation", "summarization", "qa", "math_reasoning", "rag",
    ]  # fmt: skip
    assert all(cats.count(c) >= 3 for c in set(cats))
    assert any(len(q.turns) == 2 for q in questions)


@pytest.mark.parametrize(
    "content, message",
    [
        (b'{"category": "qa"}\n', "line 1: has no 'turns'"),
        (b'{"turns": []}\n', "'turns' must be a list"),
        (b'{"turns": ["ok", 3]}\n', "turn 2 must be a non-empty string"),
        (b'{"turns": ["x"]}\n{"turns": \n', "line 2: not JSON"),
        (b'{"turns": ["\xff"]}\n', "line 1: not UTF-8"),
        (b'["x"]\n', "expected an object"),
        (b"\n# nothing\n", "holds no questions"),
    ],
)
def test_bad_question_files_say_what_is_wrong(tmp_path, content, message):
    path = tmp_path / "q.jsonl"
    path.write_bytes(content)
    with pytest.raises(QuestionFileError, match=message):
        load_questions(path)


def test_a_huge_turn_and_a_million_lines_are_refused(tmp_path):
    big = tmp_path / "big.jsonl"
    big.write_text(json.dumps({"turns": ["x" * 10_000_000]}) + "\n", encoding="utf-8")
    with pytest.raises(QuestionFileError, match="line 1 is longer than"):
        load_questions(big)
    many = tmp_path / "many.jsonl"
    many.write_text('{"turns": ["a"]}\n' * 1_000_000, encoding="utf-8")
    with pytest.raises(QuestionFileError, match=f"more than {MAX_QUESTIONS} questions"):
        load_questions(many)
    assert len(load_questions(many, limit=5)) == 5  # a limit reads no further


def test_configs_are_parsed_through_the_registry(monkeypatch):
    configs = parse_configs("model:4,lookup:3,model:4+tree2x16,model:2+block", {"ngram_max": 2})
    assert [(c.drafter.kind, c.k, c.rule) for c in configs] == [
        ("model", 4, "token"), ("lookup", 3, "token"), ("model", 4, "tree2x16"),
        ("model", 2, "block"),
    ]  # fmt: skip
    assert configs[1].drafter.param("ngram_max") == 2
    with pytest.raises(ValueError, match="unknown drafter 'medusa'"):
        parse_configs("medusa:4")
    # eagle3 (the head of the pair, or --head's) drafts chains and trees
    chain, tree = parse_configs("eagle3:4,eagle3:4+tree2x16", {"head": "/some/head"})
    assert chain.drafter == DrafterConfig("eagle3", head="/some/head") and chain.k == 4
    assert tree.rule == "tree2x16"
    # A drafter registered later is taken with nothing else changed.
    medusa = dataclasses.replace(registry.SPECS["model"], kind="medusa")
    monkeypatch.setitem(registry.SPECS, "medusa", medusa)
    (config,) = parse_configs("medusa:4")
    assert config.drafter == DrafterConfig("medusa") and config.k == 4


@pytest.mark.parametrize(
    "text, message",
    [
        ("model", "not DRAFTER:K"),
        ("model:0", "model:0.*K must be between 1 and 32"),
        ("model:4+typical", "lossy"),
        ("model:4+bogus", "unknown rule"),
        ("lookup:3+tree2x16", "chains only"),
        ("model:4,model:4", "named twice"),
    ],
)
def test_bad_configs_are_refused(text, message):
    with pytest.raises(ValueError, match=message):
        parse_configs(text)


def _run(q, config, tokens_by_turn, seconds, rounds=()):
    turns = tuple(
        TurnRun(tuple(t), seconds / len(tokens_by_turn), tuple(rounds)) for t in tokens_by_turn
    )
    return QuestionRun(q, "c", config, turns)


def test_first_difference_names_the_turn_and_the_token():
    target = _run(0, TARGET, [[1, 2, 3], [4, 5]], 1.0)
    assert first_difference(_run(0, "x", [[1, 2, 3], [4, 5]], 1.0), target) is None
    diff = first_difference(_run(0, "x", [[1, 2, 3], [4, 9]], 1.0), target)
    assert (diff.turn, diff.position) == (1, 1)
    diff = first_difference(_run(0, "x", [[1, 2]], 1.0), target)  # stopped early
    assert (diff.turn, diff.position) == (0, 2)


def test_rows_follow_spec_bench_definitions():
    """Two questions with known rounds and times: #MAT pooled, positions unconditional,
    speedup = mean tokens/s over the target alone's."""
    config = BenchConfig("m:2", DrafterConfig(), 2)
    r = RoundFigures
    runs = [
        # question 0: rounds emit 3 (2 accepted of 2 judged) and 1 (0 accepted, 1 judged):
        # 4 tokens in 1 s
        QuestionRun(0, "a", "m:2", (TurnRun((1, 2, 3, 4), 1.0, (r(3, 2, 2, 2), r(1, 0, 2, 1))),)),
        QuestionRun(0, "a", TARGET, (TurnRun((1, 2, 3, 4), 2.0),)),
        # question 1: one round of 2 (1 accepted, 2 drafted and judged): 2 tokens in 0.5 s
        QuestionRun(1, "b", "m:2", (TurnRun((5, 6), 0.5, (r(2, 1, 2, 2),)),)),
        QuestionRun(1, "b", TARGET, (TurnRun((5, 7), 1.0),)),
    ]
    questions = (Question("1", "a", ("x",)), Question("2", "b", ("y",)))
    result = BenchResult(runs, (config,), questions, BenchSettings(Settings(temperature=0)))
    rows = {(row.category, row.config): row for row in bench_rows(result)}
    overall = rows[("overall", "m:2")]
    assert overall.mat == pytest.approx(6 / 3)
    assert overall.accepted_by_position == pytest.approx((2 / 3, 1 / 3))
    assert overall.alpha == pytest.approx(3 / 5)  # accepted / judged, pooled
    assert overall.tokens_per_s == pytest.approx((4 + 4) / 2)
    assert overall.target_tokens_per_s == pytest.approx((2 + 2) / 2)
    assert overall.speedup == pytest.approx(2.0)
    assert overall.identical == 1  # question 2 differs at its second token
    assert rows[("a", "m:2")].mat == pytest.approx(2.0) and rows[("b", "m:2")].mat == 2.0
    low, high = overall.speedup_ci
    assert low <= overall.speedup <= high
    lines = {q.question_id: q for q in question_lines(result)}
    assert lines["1"].difference is None and lines["2"].difference.position == 1
    sampled = dataclasses.replace(result, settings=BenchSettings(Settings(temperature=1.0)))
    assert bench_rows(sampled)[0].identical is None


def _alpha_result(copies: int) -> BenchResult:
    """Questions of one category whose rounds accept 3 of 4, 1 of 3 and 2 of 2 judged
    drafts (each a round's judged drafts: the accepted ones and a rejected one, unless all
    K were accepted), each question `copies` times over."""
    config = BenchConfig("m:4", DrafterConfig(), 4)
    figures = [
        (RoundFigures(4, 3, 4, 4),),  # 3 accepted, the 4th rejected
        (RoundFigures(1, 0, 4, 1), RoundFigures(2, 1, 4, 2)),  # 0 of 1, then 1 of 2
        (RoundFigures(3, 2, 2, 2),),  # both accepted, then the bonus
    ]
    runs, questions = [], []
    for copy in range(copies):
        for i, rounds in enumerate(figures):
            q = copy * len(figures) + i
            tokens = tuple(range(sum(r.emitted for r in rounds)))
            runs.append(QuestionRun(q, "a", "m:4", (TurnRun(tokens, 1.0, rounds),)))
            runs.append(QuestionRun(q, "a", TARGET, (TurnRun(tokens, 1.5),)))
            questions.append(Question(str(q), "a", ("x",)))
    return BenchResult(runs, (config,), tuple(questions), BenchSettings(Settings(temperature=0)))


def test_alpha_is_accepted_over_judged_with_a_bootstrap_interval():
    """alpha = accepted / judged drafts pooled over the questions' rounds (6 of 9 here, not
    the mean of the questions' 0.75, 0.33, 1.0); its interval brackets it and narrows with
    more questions."""
    few = {row.category: row for row in bench_rows(_alpha_result(1))}
    many = {row.category: row for row in bench_rows(_alpha_result(10))}
    assert few["a"].alpha == pytest.approx((3 + 0 + 1 + 2) / (4 + 1 + 2 + 2))
    assert many["overall"].alpha == pytest.approx(6 / 9)
    (low, high), (low_n, high_n) = few["a"].alpha_ci, many["a"].alpha_ci
    assert low <= 6 / 9 <= high and low_n <= 6 / 9 <= high_n
    assert high_n - low_n < high - low
    assert 1 / 3 <= low and high <= 1.0  # within what any resample's pooled ratio can be
    # the JSON row carries it, and a file read back keeps it
    (row,) = [r for r in bench_rows(_alpha_result(1)) if r.category == "overall"]
    data = row.to_json()
    assert data["alpha"] == pytest.approx(6 / 9) and data["alpha_ci"] == list(row.alpha_ci)
    assert rows_from_json({"rows": [data]})[0] == row


def test_an_older_file_without_alpha_still_reads():
    (row,) = [r for r in bench_rows(_alpha_result(1)) if r.category == "overall"]
    data = row.to_json()
    del data["alpha"], data["alpha_ci"]
    (old,) = rows_from_json({"rows": [data]})
    assert old.alpha is None and old.alpha_ci is None and old.mat == row.mat
    with pytest.raises(ValueError, match="'alpha' must be a number"):
        rows_from_json({"rows": [{**data, "alpha": "x"}]})


def test_alpha_in_the_csv_columns_and_the_markdown_rows():
    import csv

    from specviz.cli.bench.bench_text import csv_text, detail

    rows = bench_rows(_alpha_result(1))
    overall = rows[-1]
    low, high = overall.alpha_ci
    (line,) = [r for r in csv.DictReader(csv_text(rows).splitlines()) if r["category"] == "overall"]
    assert float(line["alpha"]) == pytest.approx(6 / 9, abs=1e-5)
    assert (float(line["alpha_low"]), float(line["alpha_high"])) == pytest.approx((low, high))
    head, _, *lines = detail(rows, greedy=True)
    assert "| #MAT [95%] | alpha [95%] |" in head
    assert f"| 0.67 [{low:.2f}, {high:.2f}] |" in lines[-1]
    older = dataclasses.replace(overall, alpha=None, alpha_ci=None)
    assert "| n/a |" in detail([older], greedy=True)[-1]
    (line,) = csv.DictReader(csv_text([older]).splitlines())
    assert line["alpha"] == line["alpha_low"] == line["alpha_high"] == ""


def test_the_plan_interleaves_the_target_alone_per_question():
    plan = bench_plan(3, ["a", "b"], seed=1)
    assert len(plan) == 9
    for i in range(3):
        assert sorted(label for q, label in plan[3 * i : 3 * i + 3]) == ["a", "b", TARGET]
        assert all(q == i for q, _ in plan[3 * i : 3 * i + 3])


def test_greedy_runs_equal_the_target_alone_over_two_turns(pair):
    questions = [
        Question("1", "w", ("In the beginning", "And then")),
        Question("2", "q", ("A fool",)),
    ]
    configs = parse_configs("model:3,lookup:2,model:3+tree2x8")
    settings = BenchSettings(Settings(temperature=0, max_new_tokens=12), warmup=False)
    result = run_bench(pair, questions, configs, settings)
    assert len(result.runs) == 2 * 4
    two_turns = [r for r in result.runs if r.question == 0]
    assert all(len(r.turns) == 2 and len(r.turns[1].tokens) > 0 for r in two_turns)
    lines = question_lines(result)
    assert len(lines) == 6 and all(line.greedy and line.difference is None for line in lines)
    assert all(row.identical == row.questions for row in bench_rows(result))


def _bench(capsys, *args):
    code = main(["bench", "--pair", "tiny", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_bench_json_on_the_tiny_pair_matches_run(capsys, tmp_path):
    questions = tmp_path / "q.jsonl"
    questions.write_text(SPEC_BENCH, encoding="utf-8")
    code, out, _ = _bench(capsys, "--questions", str(questions), "--configs", "model:4,lookup:3",
                          "--max-new-tokens", "16", "--json")  # fmt: skip
    assert code == 0
    result = json.loads(out)
    keys = {"category", "config", "questions", "mat", "mat_ci", "alpha", "alpha_ci", "speedup",
            "speedup_ci", "tokens_per_s", "identical"}  # fmt: skip
    assert all(keys <= set(row) for row in result["rows"])
    overall = [row for row in result["rows"] if row["category"] == "overall"]
    assert [row["config"] for row in overall] == ["model:4", "lookup:3"]
    assert all(row["questions"] == 2 and row["identical"] == 2 for row in overall)
    # The same question and settings through `specviz run`: the same tokens per target pass.
    mat = next(q["mat"] for q in result["questions"] if q["question_id"] == "161"
               and q["config"] == "model:4")  # fmt: skip
    assert main(["run", "--pair", "tiny", "--temperature", "0", "--k", "4", "--max-new-tokens",
                 "16", "--prompt", "Translate: Bonjour", "--json"]) == 0  # fmt: skip
    single = json.loads(capsys.readouterr().out)
    assert single["tokens_per_pass"] == pytest.approx(mat)
    # translation holds that one question: its alpha is `run`'s acceptance rate
    (row,) = [r for r in result["rows"] if r["category"] == "translation"
              and r["config"] == "model:4"]  # fmt: skip
    assert row["alpha"] == pytest.approx(single["acceptance_rate"])


def test_bench_markdown_and_csv(capsys, tmp_path):
    csv_path = tmp_path / "rows.csv"
    code, out, _ = _bench(capsys, "--configs", "lookup:3", "--limit", "2", "--max-new-tokens",
                          "8", "--csv", str(csv_path), "--temperature", "0.8")  # fmt: skip
    assert code == 0
    assert "| config | writing | #MAT | overall speedup [95%] |" in out
    assert "Greedy check" not in out  # sampled: no identity to check
    rows = csv_path.read_text(encoding="utf-8").splitlines()
    assert rows[0].startswith("category,config,questions,mat,")
    assert rows[1].startswith("writing,lookup:3,2,") and rows[2].startswith("overall,lookup:3,2,")


@pytest.mark.parametrize(
    "args, message",
    [
        (["--configs", "medusa:4"], "unknown drafter 'medusa'"),
        (["--questions", "/nonexistent.jsonl"], "no such file"),
        (["--max-new-tokens", "0"], "--max-new-tokens"),
        (["--category", "nope"], "no question of category nope"),
    ],
)
def test_bench_bad_input_is_one_line_and_exit_2(capsys, args, message):
    code, out, err = _bench(capsys, *args)
    assert code == 2 and out == ""
    assert message in err and len(err.strip().splitlines()) == 1


CHAT = (
    "{% for m in messages %}<{{ m['role'] }}>{{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}<assistant>{% endif %}"
)


def test_chat_turns_carry_the_models_own_answer(pair, monkeypatch):
    from specviz.core.bench.runs import _turn_prompt

    monkeypatch.setattr(pair.tokenizer, "chat_template", CHAT, raising=False)
    question = Question("1", "w", ("Say a word.", "Say it again."))
    answer = pair.tokenizer(" amen")["input_ids"]
    text, ids = _turn_prompt(pair, question, 1, [([1, 2], tuple(answer))], chat=True)
    assert ids is None
    assert text == "<user>Say a word.\n<assistant> amen\n<user>Say it again.\n<assistant>"
    settings = BenchSettings(Settings(temperature=0, max_new_tokens=6), chat=True, warmup=False)
    result = run_bench(pair, [question], parse_configs("model:2"), settings)
    assert all(len(r.turns) == 2 for r in result.runs)
    assert [line.difference for line in question_lines(result)] == [None]


def test_a_turn_longer_than_the_context_is_named(pair):
    from specviz.core.decoding.forward import max_positions

    limit = max_positions(pair.target)
    long_turn = " amen" * (limit + 10)
    question = Question("7", "w", ("In the beginning", long_turn))
    with pytest.raises(ValueError, match=f"question 7, turn 2: .* at most {limit}"):
        run_bench(
            pair,
            [question],
            (),
            BenchSettings(Settings(temperature=0, max_new_tokens=4), warmup=False),
        )


def test_ctrl_c_stops_the_bench_and_keeps_what_finished(pair):
    import os
    import signal

    from specviz.cli.bench.bench import _bench as bench_command

    messages = []

    def progress(message):
        messages.append(message)
        if message.startswith("run 1/"):
            os.kill(os.getpid(), signal.SIGINT)

    questions = [Question("1", "w", ("In the beginning",)), Question("2", "q", ("A fool",))]
    settings = BenchSettings(Settings(temperature=0, max_new_tokens=8), warmup=False)
    before = signal.getsignal(signal.SIGINT)
    result = bench_command(pair, questions, parse_configs("lookup:2"), settings, progress)
    assert result.cancelled and len(result.runs) == 1
    assert any("stopping after this round" in m for m in messages)
    assert signal.getsignal(signal.SIGINT) is before


def test_a_suffix_configuration_learns_only_from_its_own_earlier_questions(
    pair, monkeypatch, tmp_path
):
    """Its cache starts empty and is never saved: the process's (and the file's) cache,
    here already holding the answer, is neither read nor written, and a second suffix
    configuration does not read the first one's answer to the same question."""
    from specviz.core.bench.results import TARGET
    from specviz.core.drafters import suffix

    monkeypatch.setenv("SPECVIZ_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(suffix, "_CACHES", {})
    questions = [Question("1", "w", ("A fool and his money",)), Question("2", "w", ("The quick",))]
    settings = BenchSettings(Settings(temperature=0, max_new_tokens=24), warmup=False)
    configs = parse_configs("suffix:6,suffix:4")
    fresh = run_bench(pair, questions, configs, settings)

    def rounds(result):
        runs = result.runs
        return {(r.question, r.config): len(r.turns[0].rounds) for r in runs if r.config != TARGET}

    answers = [r.turns[0].tokens for r in fresh.runs if r.config == TARGET]
    assert all(len(a) > 8 for a in answers)
    shared = suffix.shared_cache(pair.vocab_size, suffix.fingerprint(pair), 100)
    assert shared.requests == []  # the bench wrote nothing to the process's cache
    assert not (tmp_path / "cache" / "suffix").exists()  # nor to a file
    for question, answer in zip(questions, answers, strict=True):  # the answers, remembered
        prompt = list(pair.tokenizer(question.turns[0])["input_ids"])
        shared.add(prompt + list(answer))
    again = run_bench(pair, questions, configs, settings)
    assert rounds(again) == rounds(fresh)  # nothing read from it
    assert len(shared.requests) == 2  # nor added
    caches = []  # the cache each suffix session drafts from
    real = suffix.SuffixDrafter.__init__
    monkeypatch.setattr(suffix.SuffixDrafter, "__init__",
                        lambda self, *a: caches.append(a[-1]) or real(self, *a))  # fmt: skip
    run_bench(pair, questions, configs, settings)
    assert len(caches) == 4 and len({id(c) for c in caches}) == 2  # one per configuration
    assert all(c is not shared and c.path is None for c in caches)
