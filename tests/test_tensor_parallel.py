"""`specviz run --tp-size N` under torchrun: a tiny random Llama (saved here) split over 2
CPU ranks (gloo) gives the one-process greedy text token for token, a sampled session's
trace passes inspect, and what cannot be split is refused with its numbers."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from specviz.cli.main import main

TORCHRUN = shutil.which("torchrun", path=os.path.dirname(sys.executable))
PROMPT = "the cat and the dog and the"


@pytest.fixture(scope="module")
def llama_dirs(tmp_path_factory):
    """(target, draft): random Llamas of 4 heads and 2 KV heads, the test tokenizer."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from tests.fixtures import make_tokenizer

    tokenizer = make_tokenizer()
    root = tmp_path_factory.mktemp("llama")
    dirs = []
    for name, layers, seed in (("target", 2, 0), ("draft", 1, 1)):
        torch.manual_seed(seed)
        config = LlamaConfig(
            vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128,
            num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=2,
            max_position_embeddings=256, eos_token_id=tokenizer.eos_token_id,
            bos_token_id=tokenizer.eos_token_id,
        )  # fmt: skip
        model = LlamaForCausalLM(config)
        with torch.no_grad():
            model.lm_head.weight.mul_(8.0)  # sharp enough that drafts are both kept and not
        model.save_pretrained(root / name)
        tokenizer.save_pretrained(root / name)
        dirs.append(str(root / name))
    return dirs


def torchrun(n: int, args: list[str], cwd) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "SPECVIZ_TOKEN": ""}
    command = [TORCHRUN, "--standalone", f"--nproc-per-node={n}", "-m", "specviz", "run", *args]
    return subprocess.run(command, capture_output=True, text=True, env=env, cwd=cwd, timeout=300)


@pytest.mark.skipif(TORCHRUN is None, reason="torchrun is not installed with torch")
def test_two_ranks_give_the_one_process_greedy_text_and_a_valid_trace(llama_dirs, tmp_path, capsys):
    target, draft = llama_dirs
    common = ["--target", target, "--draft", draft, "--prompt", PROMPT, "--quiet", "--json"]
    greedy = [*common, "--temperature", "0", "--max-new-tokens", "24", "--k", "3"]
    assert main(["run", *greedy]) == 0
    alone = json.loads(capsys.readouterr().out)
    split = torchrun(2, [*greedy, "--tp-size", "2"], tmp_path)
    assert split.returncode == 0, split.stderr[-2000:]
    out = json.loads(split.stdout)  # rank 0 alone printed
    assert out["text"] == alone["text"] and out["tokens"] == alone["tokens"] == 24
    trace = tmp_path / "tp.jsonl"
    sampled = [*common, "--seed", "3", "--max-new-tokens", "24", "--trace", str(trace)]
    split = torchrun(2, [*sampled, "--tp-size", "2"], tmp_path)
    assert split.returncode == 0, split.stderr[-2000:]
    assert main(["inspect", str(trace)]) == 0, capsys.readouterr().err


def test_what_cannot_be_split_is_refused(llama_dirs, pair_dirs, capsys, monkeypatch):
    target, draft = llama_dirs
    base = ["run", "--prompt", PROMPT, "--max-new-tokens", "4"]
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    assert main([*base, "--target", target, "--draft", draft, "--tp-size", "2"]) == 2
    assert "runs under torchrun with as many processes" in capsys.readouterr().err
    from transformers import AutoConfig, GPT2Config

    from specviz.core.models.tensor_parallel import TensorParallelError, check_plan

    with pytest.raises(TensorParallelError, match="4 attention heads, which do not divide by"):
        check_plan(AutoConfig.from_pretrained(target), 3, "llama")
    with pytest.raises(TensorParallelError, match="has no tensor-parallel plan"):
        check_plan(GPT2Config(), 2, "gpt2")


@pytest.mark.skipif(TORCHRUN is None, reason="torchrun is not installed with torch")
def test_a_served_split_target_answers_as_one_process(llama_dirs, tmp_path, pair):
    """`serve --tp-size 2`: rank 0 serves and the other rank follows each request; a client's
    greedy and sampled sessions get the rounds of the same engine in one process."""
    import queue
    import threading

    from specviz.core.engine.speculative import SpeculativeEngine
    from specviz.core.models.pair import load_pair
    from specviz.core.trace.records import Settings
    from specviz.remote.client import RemoteEngine

    target, draft = llama_dirs
    env = {**os.environ, "OMP_NUM_THREADS": "1", "SPECVIZ_TOKEN": "tp-test-token"}
    command = [TORCHRUN, "--standalone", "--nproc-per-node=2", "-m", "specviz", "serve",
               "--target", target, "--draft", draft, "--port", "0", "--tp-size", "2"]  # fmt: skip
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            text=True, env=env, cwd=tmp_path)  # fmt: skip
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: [lines.put(x) for x in proc.stdout], daemon=True).start()
    try:
        line = ""
        while not line.startswith("specviz serve: listening on"):
            line = lines.get(timeout=240)
        address = line.split()[-1]
        local = load_pair(target, draft)
        for settings in (Settings(k=3, temperature=0, max_new_tokens=16),
                         Settings(k=3, seed=3, max_new_tokens=16)):  # fmt: skip
            with RemoteEngine(address, "tp-test-token") as remote:
                remote.start(PROMPT, settings, calibrate=False)
                served = [[t.id for t in r.tokens] for r in remote.run()]
            engine = SpeculativeEngine(local, settings)
            engine.prefill(PROMPT, calibrate=False)
            assert served == [[t.id for t in r.tokens] for r in engine.run()]
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        proc.stdout.close()


def test_split_ranks_probe_after_the_same_rounds(monkeypatch):
    """Under a split target every rank probes on a fixed period (the time budget differs from
    rank to rank, and a probe's pass waits on every rank's layers); one process keeps the
    budget."""
    import torch.distributed as dist

    from specviz.core.engine.cost_probes import Prober

    assert Prober().plan.budget is not None
    monkeypatch.setattr(dist, "is_initialized", lambda: True)
    monkeypatch.setattr(dist, "get_world_size", lambda: 2)
    prober = Prober()
    assert prober.plan.budget is None
    assert [i for i in range(4, 20) if prober.due(i)] == [4, 8, 12, 16]  # rounds, not seconds
