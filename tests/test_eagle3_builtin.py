"""builtin:tiny's own EAGLE-3 head (resources/models/tiny/eagle3, trained by
scripts/train_head.py): exact on the pair it was trained for, its layers found by
check-head, a drafter's warning said before the first round, bad heads refused by the
command line with nothing written."""

from __future__ import annotations

import json
import shutil

import pytest
import torch

from specviz.cli.main import main
from specviz.core.decoding.warp import SamplingConfig
from specviz.core.drafters.eagle3.fit import Fit, misfit_note, z_score
from specviz.core.drafters.registry import DrafterConfig
from specviz.core.engine.speculative import SpeculativeEngine
from specviz.core.models.builtin import builtin_head
from specviz.core.trace.records import Settings, drafter_notes
from tests.test_drafters import greedy_reference, sequence_pvalue
from tests.test_sampling import LEVEL

EAGLE = DrafterConfig("eagle3")  # the pair's own head
PROMPT = "And God said, Let there be light: and there was"
N_RUNS = 200


@pytest.fixture(scope="module")
def tiny():
    from specviz.core.models.pair import load_pair

    return load_pair("builtin:tiny", None)


@pytest.fixture(scope="module")
def shifted(tmp_path_factory):
    """The built-in head with its aux layer ids all moved up by one."""
    folder = tmp_path_factory.mktemp("shifted") / "eagle3"
    shutil.copytree(builtin_head("builtin:tiny"), folder)
    config = json.loads((folder / "config.json").read_text())
    config["eagle_aux_hidden_state_layer_ids"] = [
        i + 1 for i in config["eagle_aux_hidden_state_layer_ids"]
    ]
    (folder / "config.json").write_text(json.dumps(config))
    return folder


@pytest.mark.parametrize("width", [1, 2])
def test_greedy_equals_the_targets_greedy_and_the_head_keeps_drafts(tiny, width):
    settings = Settings(k=4, temperature=0, max_new_tokens=40, tree_width=width, tree_budget=12)
    engine = SpeculativeEngine(tiny, settings, drafter=EAGLE)
    header = engine.prefill(PROMPT, calibrate=False)
    rounds = list(engine.run())
    ours = [t.id for r in rounds for t in r.tokens if t.emitted]
    assert ours == greedy_reference(tiny.target, list(header.prompt_ids), 40, tiny.eos_token_id)
    tokens_per_pass = len(ours) / len(rounds)
    assert tokens_per_pass > 2.0  # a trained head: most drafts kept (an untrained one: ~1)
    assert drafter_notes(header) == []  # on its own layers: nothing to say


# T 1 chains, T 0.7 trees here; test_eagle3.py the other two on the test GPT-2's random head
@pytest.mark.parametrize("width,temperature", [(1, 1.0), (2, 0.7)])
def test_sequences_follow_the_target(tiny, width, temperature):
    settings = Settings(k=3, temperature=temperature, max_new_tokens=3, tree_width=width,
                        tree_budget=6)  # fmt: skip
    engine = SpeculativeEngine(tiny, settings, trace=False, drafter=EAGLE)
    prompt_ids = list(tiny.tokenizer(PROMPT)["input_ids"])
    gen = torch.Generator().manual_seed(7)
    sequences, fates = [], set()
    for _ in range(N_RUNS):
        engine.prefill("", prompt_ids=prompt_ids, calibrate=False)
        engine.generator = gen
        rounds = list(engine.run())
        sequences.append(tuple(t.id for r in rounds for t in r.tokens if t.emitted))
        fates.update(t.status for r in rounds for t in r.tokens)
    assert {"accepted", "rejected", "bonus"} <= fates, fates
    sampling = SamplingConfig(temperature=temperature)
    assert sequence_pvalue(tiny, prompt_ids, sequences, sampling) > LEVEL


def check_head(capsys, *args) -> dict:
    code = main(["check-head", *map(str, args), "--json"])
    out = capsys.readouterr()
    assert code == 0, out.err
    return json.loads(out.out)


def test_check_head_names_the_layers_a_head_fits(capsys, shifted):
    own = check_head(capsys, "builtin:tiny", "--tokens", "48")
    assert own["best_shift"] == 0 and own["layers"] == [1, 3, 4] and not own["clear"]
    first = {f["shift"]: f["acceptance"][0] for f in own["shifts"]}
    assert first[0] > first[-1] and first[0] > first[1]
    moved = check_head(capsys, shifted, "--target", "builtin:tiny", "--tokens", "96")
    assert moved["layers"] == [2, 4, 5] and moved["shifts"][2]["layers"] is None  # 6 is past
    assert moved["best_shift"] == -1 and moved["clear"], moved  # paired z >= 3.09


def test_check_head_runs_on_the_engines_threads(capsys, monkeypatch, tmp_path):
    """One torch thread per core but one, as every engine command: with all of them, any
    other work on the machine stalls each operation (check-head of tiny's head took 55 s of
    CPU on a busy 2-core machine with 2 threads, 16 s with 1)."""
    from specviz.core.engine import threads

    monkeypatch.setattr(threads, "cores", lambda: 4)
    try:
        assert main(["check-head", str(tmp_path / "none"), "--target", "builtin:tiny"]) == 2
        assert torch.get_num_threads() == 3
        assert main(["check-head", str(tmp_path / "none"), "--target", "builtin:tiny",
                     "--threads", "2"]) == 2  # fmt: skip
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(1)
    capsys.readouterr()


def fit_of(shift: int, matched: float, expected: list[float]) -> Fit:
    return Fit(shift, (shift + 1,), (matched,), (len(expected),), torch.tensor(expected))


def test_the_load_time_probe_warns_only_when_another_shift_is_clearly_better():
    own = fit_of(0, 0.25, [0.3, 0.5] * 20)
    worse = fit_of(-1, 0.2, [0.2, 0.4] * 20)
    assert misfit_note([worse, own]) is None  # the configured ids fit best
    # differences 0.1 and -0.05 (mean 0.025, sd 0.0759): z = 0.025 / (0.0759 / sqrt(40)) = 2.08
    slightly = fit_of(1, 0.3, [0.4, 0.45] * 20)
    assert z_score(slightly, own) == pytest.approx(2.08, abs=0.01)
    assert misfit_note([own, slightly]) is None
    clearly = fit_of(1, 0.55, [0.4, 0.5] * 20)  # differences 0.1 and 0: z 6.24
    assert z_score(clearly, own) == pytest.approx(6.24, abs=0.01)
    note = misfit_note([own, clearly])
    assert note and "[2] (ids shifted by +1)" in note and "0.55 of the time against 0.25" in note
    assert "expected acceptance at T 1 0.45 against 0.40, paired z 6.2" in note, note
    assert z_score(fit_of(1, 0.3, [0.3, 0.5] * 20), own) == 0.0  # the same everywhere


def test_a_drafters_warning_is_said_before_the_first_round(capsys, tmp_path):
    folder = tmp_path / "eagle3"
    shutil.copytree(builtin_head("builtin:tiny"), folder)
    config = json.loads((folder / "config.json").read_text())
    config["speculators_config"]["verifier"]["name_or_path"] = "someone/another-model"
    (folder / "config.json").write_text(json.dumps(config))
    trace = tmp_path / "run.jsonl"
    code = main(["run", "--pair", "tiny", "--drafter", "eagle3", "--head", str(folder),
                 "--prompt", PROMPT, "--max-new-tokens", "4", "--temperature", "0",
                 "--trace", str(trace)])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 0, err
    words = "the head was trained for 'someone/another-model', not this target"
    assert f"[specviz] warning: {words}" in err
    header = json.loads(trace.read_text().splitlines()[0])
    assert any(words in n for n in header["drafter_notes"])  # the trace keeps it


def test_a_session_with_a_head_on_the_wrong_layers_says_so_before_its_first_round(capsys, tmp_path):
    # tiny's head on [0, 2, 3] instead of its [1, 3, 4]: the load-time probe (356 positions
    # of fixed text) calls the +1 shift clearly better on the first drafts' expected acceptance
    folder = tmp_path / "eagle3"
    shutil.copytree(builtin_head("builtin:tiny"), folder)
    config = json.loads((folder / "config.json").read_text())
    config["eagle_aux_hidden_state_layer_ids"] = [0, 2, 3]
    (folder / "config.json").write_text(json.dumps(config))
    code = main(["run", "--pair", "tiny", "--drafter", "eagle3", "--head", str(folder),
                 "--prompt", PROMPT, "--max-new-tokens", "4", "--temperature", "0"])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 0, err
    warning = next(line for line in err.splitlines() if "ids shifted by +1" in line)
    assert warning.startswith("[specviz] warning: the head fits the target's layers [1, 3, 4]")
    assert "paired z" in warning


def test_a_head_is_loaded_and_probed_once_per_process_until_its_files_change(
    tiny, tmp_path, monkeypatch
):
    """A bench or the window makes a drafter per session: the head's files are read and its
    layers probed (a target pass) once; a rewritten folder is read again."""
    from specviz.core.drafters.eagle3 import drafter as eagle3
    from specviz.core.drafters.registry import make_drafter

    folder = tmp_path / "eagle3"
    shutil.copytree(builtin_head("builtin:tiny"), folder)
    probes = []
    real = eagle3.fit
    monkeypatch.setattr(eagle3, "fit", lambda *a, **kw: probes.append(1) or real(*a, **kw))
    config = DrafterConfig("eagle3", head=str(folder))
    first, second = make_drafter(config, tiny), make_drafter(config, tiny)
    assert len(probes) == 1 and first.head is second.head and first is not second
    assert first.cache is not second.cache  # each session its own head cache
    settings = Settings(k=3, temperature=0, max_new_tokens=8)
    texts = []
    for _ in range(2):  # a session on the kept head emits what a fresh one does
        engine = SpeculativeEngine(tiny, settings, trace=False, drafter=config)
        engine.prefill(PROMPT, calibrate=False)
        texts.append([t.id for r in engine.run() for t in r.tokens if t.emitted])
    assert texts[0] == texts[1] and len(probes) == 1
    body = json.loads((folder / "config.json").read_text())
    body["eagle_aux_hidden_state_layer_ids"] = [0, 2, 3]
    (folder / "config.json").write_text(json.dumps(body, indent=1))  # another size
    moved = make_drafter(config, tiny)
    assert len(probes) == 2 and moved.target_layers == (0, 2, 3)
    assert any("ids shifted by +1" in n for n in moved.notes)


BAD_CONFIGS = {
    "layers past the target": {"eagle_aux_hidden_state_layer_ids": [1, 3, 9]},
    "not a head": {"speculators_model_type": "medusa"},
}


@pytest.mark.parametrize("case", list(BAD_CONFIGS))
def test_a_bad_head_is_one_line_and_exit_2_with_nothing_written(capsys, tmp_path, case):
    folder = tmp_path / "head"
    shutil.copytree(builtin_head("builtin:tiny"), folder)
    config = json.loads((folder / "config.json").read_text())
    config.update(BAD_CONFIGS[case])
    (folder / "config.json").write_text(json.dumps(config))
    trace = tmp_path / "out.jsonl"
    code = main(["run", "--pair", "tiny", "--drafter", "eagle3", "--head", str(folder),
                 "--prompt", PROMPT, "--max-new-tokens", "4", "--trace", str(trace)])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2
    assert len([line for line in err.splitlines() if "error" in line]) == 1, err
    assert not trace.exists() and not list(tmp_path.glob("out*"))
