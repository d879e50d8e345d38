"""Issue 48: `specviz cache` lists what the cache folder holds (kind, size, total) and
`--clear [WHAT]` removes all, a kind or one entry, never anything outside the folder."""

from __future__ import annotations

import json
import os

import pytest

from specviz.cli.main import main


@pytest.fixture
def cache(tmp_path, monkeypatch):
    folder = tmp_path / "cache"
    (folder / "smollm2-135m-instruct" / "target").mkdir(parents=True)
    (folder / "smollm2-135m-instruct" / "target" / "model.safetensors").write_bytes(b"w" * 5000)
    (folder / "suffix").mkdir()
    (folder / "suffix" / "0123.json").write_text("{}")
    (folder / "dtype-probe.json").write_text("{}\n")
    (folder / "autosave-12-abcdef01.jsonl").write_text("x" * 10)
    (folder / "serve-8765.token").write_text("t\n")
    (folder / "odd\x1b]0;title\x07").write_text("?")
    monkeypatch.setenv("SPECVIZ_CACHE", str(folder))
    return folder


def test_it_lists_each_entry_with_its_kind_and_size(cache, capsys):
    assert main(["cache"]) == 0
    out = capsys.readouterr().out
    assert "converted model" in out and "5.0 KB  smollm2-135m-instruct" in out
    for label in ("dtype probes", "suffix cache", "autosave", "serve token", "other"):
        assert label in out
    assert "\x1b" not in out and "odd\\x1b]0;title\\x07" in out  # escaped, not obeyed
    assert "total" in out and "(6 entries)" in out
    assert main(["cache", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    kinds = {os.path.basename(e["path"]): e["kind"] for e in report["entries"]}
    assert kinds["smollm2-135m-instruct"] == "models" and kinds["suffix"] == "suffix"
    assert report["total_bytes"] == 5000 + 2 + 3 + 10 + 2 + 1


def test_clear_removes_a_kind_an_entry_or_all(cache, capsys):
    assert main(["cache", "--clear", "suffix"]) == 0
    assert not (cache / "suffix").exists() and "removed suffix cache" in capsys.readouterr().out
    assert main(["cache", "--clear", "dtype-probe.json"]) == 0
    assert not (cache / "dtype-probe.json").exists()
    assert main(["cache", "--clear"]) == 0
    out = capsys.readouterr().out
    assert "removed 4 entries" in out and "smollm2-135m-instruct" in out
    assert list(cache.iterdir()) == []
    assert main(["cache", "--clear"]) == 0
    assert "nothing to remove" in capsys.readouterr().out


def test_clear_refuses_what_is_outside_the_cache(cache, tmp_path, capsys):
    outside = tmp_path / "precious.txt"
    outside.write_text("keep me")
    (cache / "link").symlink_to(tmp_path)  # a link in the cache: removed, never followed
    for what in (str(outside), str(cache / ".." / "precious.txt"), "nothing-here"):
        assert main(["cache", "--clear", what]) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("specviz: error: ") and len(err.splitlines()) == 1
    assert main(["cache", "--clear", "link"]) == 0
    assert outside.read_text() == "keep me" and not (cache / "link").exists()
    assert (cache / "suffix" / "0123.json").exists()


def test_an_absent_cache_folder_is_reported_empty(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("SPECVIZ_CACHE", str(tmp_path / "none"))
    assert main(["cache"]) == 0
    assert "nothing cached" in capsys.readouterr().out
    assert main(["cache", "--clear"]) == 0
