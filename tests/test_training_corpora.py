"""`--data debian:NAME`: the English text of an installed (or unpacked) Debian package as
training documents (core.training.corpora), on a small package tree built here: HTML pages,
a dictd dictionary, fortunes, GNU info, POD, and what the reader must leave out."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from specviz.core.training import corpora, sources
from specviz.core.training.config import TrainError

PAGE = """<!DOCTYPE html><html><head><title>T</title><style>p {color: red}</style>
<script>var x = "<p>not text</p>";</script></head><body>
<div id="banner"><a href="e"><span>Download the ebook</span></a></div>
<ul class="docnav top"><li class="previous"><a href="p.html"><strong>Prev</strong></a></li></ul>
<div class="related" role="navigation"><ul><li><a href="i.html">index</a></li></ul></div>
<div class="body" role="main"><h1>Subprocesses<a class="headerlink" href="#s">¶</a></h1>
<p>This section   describes
high-level APIs &amp; how to <em>use</em> them.</p>
<pre>import asyncio
    print("hi")</pre><p>Last<br>line.</p></div>
<div class="footer">&copy; Copyright 2001</div></body></html>"""


def _b64(n: int) -> str:
    digits = ""
    while True:
        digits = corpora._DICT_B64[n % 64] + digits
        n //= 64
        if n == 0:
            return digits


def _dictd(folder: Path, name: str, entries: dict[str, str]) -> None:
    """A dictd dictionary: NAME.dict.dz (gzip, as dictzip is) and NAME.index."""
    body, index = b"", []
    for head, text in {"00-database-info": "about this dictionary", **entries}.items():
        raw = f"{head}\n  {text}\n\n".encode()
        index.append(f"{head}\t{_b64(len(body))}\t{_b64(len(raw))}")
        body += raw
    index.append(f"alias\t{index[-1].split(chr(9), 1)[1]}")  # two words, one entry
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.dict.dz").write_bytes(gzip.compress(body))
    (folder / f"{name}.index").write_text("\n".join(index) + "\n")


def _tree(root: Path) -> Path:
    """An unpacked documentation package: HTML in English and French, Debian's files."""
    doc = root / "usr/share/doc/pydoc"
    (doc / "html/library").mkdir(parents=True)
    (doc / "html/library/sub.html").write_text(PAGE)
    (doc / "html/_sources").mkdir()
    (doc / "html/_sources/sub.rst.txt").write_text("the page's source: the same text")
    (doc / "html/fr-FR").mkdir()
    (doc / "html/fr-FR/sub.html").write_text("<p>Bonjour</p>")
    (doc / "html/en-US").mkdir()
    (doc / "html/en-US/faq.html").write_text("<p>An English page.</p>")
    (doc / "copyright").write_text("License: PSF")
    (doc / "changelog.Debian.gz").write_bytes(gzip.compress(b"pydoc (1.0) unstable"))
    (doc / "notes.txt").write_text("plain text: read only when there is no HTML")
    return root


def test_an_unpacked_package_gives_one_document_per_english_page(tmp_path):
    texts = corpora.package_texts(f"debian:{_tree(tmp_path / 'pkg')}")
    assert len(texts) == 2  # en-US/faq.html and library/sub.html; not fr-FR, not _sources
    faq, sub = texts
    assert faq == "An English page."
    assert sub == ("Subprocesses\n\nThis section describes high-level APIs & how to use "
                   "them.\n\nimport asyncio\n    print(\"hi\")\n\nLast\n\nline.")  # fmt: skip
    left_out = ("not text", "color", "index", "Copyright", "¶", "Bonjour", "PSF", "ebook", "Prev")
    for dropped in left_out:
        assert dropped not in sub + faq


def test_plain_text_is_read_when_a_package_has_nothing_richer(tmp_path):
    root = tmp_path / "pkg"
    (root / "usr/share/doc/p").mkdir(parents=True)
    (root / "usr/share/doc/p/guide.txt").write_text("A guide.\n\nIn two paragraphs.\n")
    (root / "usr/share/doc/p/more.md.gz").write_bytes(gzip.compress(b"# More\n\nText."))
    (root / "usr/share/doc/p/examples").mkdir()
    (root / "usr/share/doc/p/examples/run.txt").write_text("code, not prose")
    (root / "usr/share/doc/p/logo.png").write_bytes(b"\x89PNG\0\0")
    assert corpora.package_texts(f"debian:{root}") == ["A guide.\n\nIn two paragraphs.",
                                                       "# More\n\nText."]  # fmt: skip


def test_a_dictionary_is_cut_into_entries_by_its_index(tmp_path):
    root = tmp_path / "dict"
    _dictd(root / "usr/share/dictd", "wn", {"acclaim": "n 1: enthusiastic approval",
                                            "zebra": "n 1: striped horse"})  # fmt: skip
    texts = corpora.package_texts(f"debian:{root}")
    assert texts == ["acclaim\nn 1: enthusiastic approval", "zebra\nn 1: striped horse"]


def test_fortunes_info_and_pod(tmp_path):
    root = tmp_path / "f"
    games = root / "usr/share/games/fortunes"
    games.mkdir(parents=True)
    (games / "riddles").write_text("Q: Why?\nA: Because.\n%\nSecond one.\n%\n")
    (games / "riddles.dat").write_bytes(b"\0\0\0\2binary")
    assert corpora.package_texts(f"debian:{root}") == ["Q: Why?\nA: Because.", "Second one."]

    info = tmp_path / "i/usr/share/info"
    info.mkdir(parents=True)
    node = "\x1f\nFile: std.info,  Node: Top,  Next: Intro\n\nGNU coding standards.\n"
    (info / "std.info.gz").write_bytes(
        gzip.compress(
            f"This is std.info.\n{node}\x1f\nTag Table:\nNode: Top\x7f42\n\x1f\nEnd".encode()
        )
    )
    assert corpora.package_texts(f"debian:{tmp_path / 'i'}") == [
        "This is std.info.\n\nGNU coding standards.\n\nEnd"
    ]

    pod = tmp_path / "p/usr/share/perl/pod"
    pod.mkdir(parents=True)
    (pod / "perlintro.pod").write_text(
        "=head1 NAME\n\nperlintro - a B<brief> intro to L<Perl|perl> E<gt> C<C<x>>\n\n"
        "=begin html\n\n<b>skip</b>\n\n=end html\n\n=cut\n"
    )
    assert corpora.package_texts(f"debian:{tmp_path / 'p'}") == [
        "NAME\n\nperlintro - a brief intro to Perl > x"
    ]


def test_an_installed_package_is_read_through_dpkgs_file_list(tmp_path, monkeypatch):
    root = _tree(tmp_path / "pkg")
    info = tmp_path / "dpkg"
    info.mkdir()
    files = sorted(str(p) for p in root.rglob("*"))
    (info / "pydoc:all.list").write_text("/.\n" + "\n".join(files) + "\n/no/such/file\n")
    monkeypatch.setattr(corpora, "DPKG_INFO", info)
    source = sources.read_source("debian:pydoc", 0.5)
    assert source.kind == "text" and source.weight == 0.5 and len(source.documents) == 2
    assert source.bytes == sum(len(d.text.encode()) for d in source.documents)
    assert "Debian pydoc" in source.licence
    assert "public domain" in sources.licence_of("debian:sqlite3-doc")
    unread = "Debian pydoc: see its copyright file"  # not machine-readable (no Files: *)
    assert sources.licence_of(f"debian:{root}").startswith(unread)
    (root / "usr/share/doc/pydoc/copyright").write_text("Files: *\nCopyright: x\nLicense: MIT\n")
    assert sources.licence_of(f"debian:{root}") == "MIT (Debian pydoc)"
    specs = sources.parse_specs(["debian:pydoc:2,notes.txt"])
    assert specs == [("debian:pydoc", 2.0), ("notes.txt", 1.0)]
    with pytest.raises(TrainError, match="no such installed package.*apt-get install nope"):
        sources.read_source("debian:nope")
    empty = tmp_path / "empty/usr/share/doc/e"
    empty.mkdir(parents=True)
    (empty / "copyright").write_text("x")
    with pytest.raises(TrainError, match="no text this reader knows"):
        corpora.package_texts(f"debian:{tmp_path / 'empty'}")


def test_train_head_trains_on_a_package(tmp_path, capsys):
    from specviz.cli.main import main
    from tests.train_head_data import FAST, write_text

    root = tmp_path / "pkg/usr/share/doc/guide/html"
    root.mkdir(parents=True)
    paragraphs = write_text(tmp_path / "t.txt").read_text().split("\n\n")
    for i in range(0, 40, 10):
        body = "".join(f"<p>{p}</p>" for p in paragraphs[i : i + 10])
        (root / f"page{i}.html").write_text(f"<html><body>{body}</body></html>")
    out = tmp_path / "head"
    code = main(["train-head", "--target", "builtin:tiny", "--data", f"debian:{tmp_path / 'pkg'}",
                 "--out", str(out), *FAST, "--tokens", "1024", "--eval-every", "2",
                 "--no-check"])  # fmt: skip
    assert code == 0, capsys.readouterr().err
    report = json.loads((out / "training.json").read_text())
    assert report["curve"] and report["tokens_seen"] > 0
    assert "debian:" in (out / "README.md").read_text()
