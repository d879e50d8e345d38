"""English text that Debian packages install, as training documents: `--data debian:NAME`.

`debian:NAME` reads the files dpkg installed for package NAME (/var/lib/dpkg/info/NAME.list;
`apt-get install NAME` first), `debian:DIR` a package unpacked without installing it
(`apt-get download NAME && dpkg-deb -x NAME_*.deb DIR`). One document per page, dictionary
entry, fortune or Bible chapter; the end token goes between documents (core.training.examples).

A package often ships one text in several formats; the reader takes one, the first found of:
dictd dictionaries (`*.dict.dz`, cut into entries by their `.index`), fortune files
(`/usr/share/games/fortunes`, `%`-separated), HTML (tags, scripts and navigation dropped), GNU
info, Perl POD, plain text (`.txt`, `.md`, `.rst`, gzipped or not). The King James Bible
(bible-kjv-text's data is compressed) is read through the `bible` program of `bible-kjv`.
Only English: a folder named for another locale (`fr-FR`, `pt_BR`) is skipped. Never read:
Debian's copyright and changelog files, `examples/` folders, `_static`/`_sources`-style
folders (Sphinx keeps the page sources there: the pages again), man pages.

Licences: resources/models/README.md lists what was read and decided for each package
(PACKAGES below holds the verdicts); an unlisted package's licence is its copyright file's.
"""

from __future__ import annotations

import gzip
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

from specviz.core.training.config import TrainError

PREFIX = "debian:"
DPKG_INFO = Path("/var/lib/dpkg/info")
FORTUNES = "/usr/share/games/fortunes/"

# What each surveyed package's copyright file says of its text, and the verdict for training
# a model and shipping it (resources/models/README.md has the table with sizes and tokens).
_COPYLEFT = "copyleft: publish a head trained on it under the same terms"
PACKAGES = {
    "bible-kjv-text": "public domain (King James Version, 1611; in the UK the Crown's letters "
    "patent cover printing it)",
    "bible-kjv": "public domain (King James Version, 1611)",
    "fortunes": "BSD (University of California): keep the notice with the head",
    "fortunes-min": "BSD (University of California): keep the notice with the head",
    "python3.11-doc": "PSF License Agreement: keep the PSF notice with the head",
    "sqlite3-doc": "public domain (SQLite documentation)",
    "postgresql-doc-15": "PostgreSQL licence (BSD-style): keep the notice with the head",
    "dict-wn": "WordNet 3.0 licence (BSD-style): keep the notice with the head",
    "wordnet-base": "WordNet 3.0 licence (BSD-style): keep the notice with the head",
    "dict-jargon": "public domain (Jargon File 4.4.7)",
    "dict-devil": "public domain (Bierce, The Devil's Dictionary, 1911)",
    "dict-gcide": f"GPL-2+ (GCIDE); {_COPYLEFT}",
    "dict-foldoc": f"GFDL-1.1+, no invariant sections (FOLDOC); {_COPYLEFT}",
    "dict-vera": f"GFDL-1.1+, no invariant sections (V.E.R.A.); {_COPYLEFT}",
    "gnu-standards": f"GFDL-1.3+, no invariant sections; {_COPYLEFT}",
    "bash-doc": f"GPL-3+, the manual GFDL-1.3; {_COPYLEFT}",
    "debian-handbook": f"GPL-2+ or CC-BY-SA-3.0; {_COPYLEFT}",
    "debian-reference-en": f"GPL-2+; {_COPYLEFT}",
    "debian-policy": f"GPL-2+; {_COPYLEFT}",
    "developers-reference": f"GPL-2; {_COPYLEFT}",
    "maint-guide": f"GPL-2+; {_COPYLEFT}",
    "aptitude-doc-en": f"GPL-2+; {_COPYLEFT}",
    "git-doc": f"GPL-2; {_COPYLEFT}",
    "perl-doc": f"GPL-1+ or Artistic; {_COPYLEFT}",
    "debian-faq": f"SPI's verbatim-copying notice, modified versions under the same; {_COPYLEFT}",
}

_DICT_B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
_LOCALE = re.compile(r"[a-z]{2,3}[-_][A-Z]{2}(@\w+)?")
_NEVER = re.compile(
    r"(^|/)(copyright|changelog[^/]*|NEWS[^/]*|README\.Debian[^/]*|[^/]+\.(dat|u8|index))$"
)
_SKIP_DIRS = {"examples", "man", "lintian", "doc-base", "bug"}
_TEXT = re.compile(r"\.(txt|md|rst|text)(\.gz)?$")


def is_spec(path: str) -> bool:
    return path.startswith(PREFIX)


def licence(spec: str) -> str:
    """What is known of a package's licence: PACKAGES' verdict, else its copyright file's
    `Files: *` licence. An unpacked folder is named by the copyright file in it."""
    name = spec[len(PREFIX) :] if is_spec(spec) else spec
    file = Path(f"/usr/share/doc/{name}/copyright")
    if "/" in name:
        found = sorted(Path(name).expanduser().glob("usr/share/doc/*/copyright"))
        file = found[0] if found else file
        name = file.parent.name if found else name
    if name in PACKAGES:
        return f"{PACKAGES[name]} (Debian {name})"
    copyright_ = _copyright(file)
    return f"{copyright_} (Debian {name})" if copyright_ else (
        f"Debian {name}: see its copyright file before publishing the head")  # fmt: skip


def _copyright(file: Path) -> str:
    """The License of `Files: *` in a package's machine-readable copyright file."""
    try:
        text = file.read_text(errors="replace")
    except OSError:
        return ""
    m = re.search(r"^Files:\s*\*\s*$.*?^License:\s*(.+)$", text, re.M | re.S)
    return m.group(1).strip() if m else ""


# ------------------------------------------------------------------------------ files


def package_files(name: str, info: Path | None = None) -> list[Path]:
    """The regular files dpkg installed for package `name` (TrainError when it is not)."""
    info = info or DPKG_INFO
    lists = sorted(info.glob(f"{name}.list")) + sorted(info.glob(f"{name}:*.list"))
    if not re.fullmatch(r"[a-z0-9][a-z0-9+.-]*", name) or not lists:
        raise TrainError(
            f"{PREFIX}{name}: no such installed package (apt-get install {name}, or unpack "
            "it: dpkg-deb -x PKG.deb DIR, then --data debian:DIR)"
        )
    files = []
    for path in lists[0].read_text(encoding="utf-8", errors="replace").splitlines():
        file = Path(path)
        if path.startswith("/") and file.is_file() and not file.is_symlink():
            files.append(file)
    return files


def tree_files(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and not p.is_symlink()]


def _wanted(path: Path, root: Path) -> bool:
    rel = path.relative_to(root) if path.is_relative_to(root) else path
    parts = rel.parts
    if _NEVER.search(rel.as_posix()) or any(p in _SKIP_DIRS for p in parts[:-1]):
        return False
    if any(p.startswith(("_", ".")) for p in parts):
        return False
    return not any(_LOCALE.fullmatch(p) and not p.startswith("en") for p in parts[:-1])


def _kind(path: Path) -> str | None:
    name, posix = path.name, path.as_posix()
    if name.endswith((".dict.dz", ".dict")):
        return "dict"
    if FORTUNES in posix and "." not in name:
        return "fortune"
    if name.endswith((".html", ".htm")):
        return "html"
    if re.search(r"\.info(-\d+)?(\.gz)?$", name):
        return "info"
    if re.search(r"\.pod(\.gz)?$", name):
        return "pod"
    if _TEXT.search(name):
        return "text"
    return None


ORDER = ("dict", "fortune", "html", "info", "pod", "text")


def choose(files: list[Path], root: Path) -> tuple[str | None, list[Path]]:
    """(the format read, its files, sorted): the first format of ORDER the package has."""
    kinds: dict[str, list[Path]] = {}
    for path in files:
        if _wanted(path, root) and (kind := _kind(path)):
            kinds.setdefault(kind, []).append(path)
    for kind in ORDER:
        if kind in kinds:
            return kind, sorted(kinds[kind])
    return None, []


# ---------------------------------------------------------------------------- readers


def _bytes(path: Path) -> bytes:
    data = path.read_bytes()
    if path.suffix in (".gz", ".dz"):  # a dictzip file is a gzip file
        try:
            return gzip.decompress(data)
        except (OSError, EOFError):
            return b""
    return data


def _read(path: Path) -> str:
    data = _bytes(path)
    if b"\0" in data[:4096]:
        return ""  # not text
    return data.decode("utf-8", errors="replace")


class _HtmlText(HTMLParser):
    """Text of an HTML page: blocks become paragraphs, whitespace collapsed outside <pre>;
    scripts, styles, the head, forms and navigation (Sphinx's sidebar and related bars,
    DocBook's navheader/navfooter and Publican's docnav and banner, <nav>) are dropped."""

    SKIP = {"script", "style", "head", "nav", "noscript", "svg", "form", "button", "select"}
    SKIP_CLASS = re.compile(
        r"\b(sphinxsidebar|related|footer|navheader|navfooter|headerlink|breadcrumbs?|"
        r"menu|toc|navigation|docnav)\b"
    )
    VOID = {"br", "img", "hr", "meta", "link", "input", "wbr", "area", "base", "col",
            "source", "embed", "param", "track"}  # fmt: skip
    BLOCK = {"p", "div", "h1", "h2", "h3", "h4", "h5", "h6", "li", "pre", "tr", "dt", "dd",
             "table", "section", "blockquote", "ul", "ol", "dl", "article", "body",
             "title", "caption", "figure", "header", "footer", "main", "aside"}  # fmt: skip

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.stack: list[tuple[str, bool]] = []  # (tag, skipped)
        self.parts: list[str] = []
        self.skipping = 0
        self.pre = 0

    def handle_starttag(self, tag, attrs):
        if tag in self.VOID:
            if tag in ("br", "hr") and not self.skipping:
                self.parts.append("\n" if self.pre else "\n\n")
            return
        a = dict(attrs)
        skip = tag in self.SKIP or a.get("role") == "navigation" or a.get("id") == "banner"
        skip = skip or bool(self.SKIP_CLASS.search(a.get("class") or ""))
        self.stack.append((tag, skip))
        self.skipping += skip
        self.pre += tag == "pre"
        if tag in self.BLOCK and not self.skipping:
            self.parts.append("\n\n")

    def handle_endtag(self, tag):
        if not any(t == tag for t, _ in self.stack):
            return
        while self.stack:
            t, skip = self.stack.pop()
            self.skipping -= skip
            self.pre -= t == "pre"
            if t == tag:
                break
        if tag in self.BLOCK and not self.skipping:
            self.parts.append("\n\n")

    def handle_data(self, data):
        if self.skipping:
            return
        if self.pre:
            self.parts.append(data.replace("\n", "\x00"))  # kept through the collapse
        else:
            self.parts.append(re.sub(r"\s+", " ", data))

    def text(self) -> str:
        paragraphs = []
        for block in "".join(self.parts).split("\n\n"):
            block = block.strip(" \t\n").replace("\x00", "\n").strip("\n")
            if block.strip():
                paragraphs.append(block)
        return "\n\n".join(paragraphs)


def html_text(source: str) -> str:
    parser = _HtmlText()
    try:
        parser.feed(source)
        parser.close()
    except (AssertionError, ValueError):  # malformed markup: what was read so far
        pass
    return parser.text()


def dict_entries(path: Path) -> list[str]:
    """A dictd dictionary's entries, cut by its index (each offset once; the
    00-database-* entries, which describe the dictionary, left out)."""
    data = _bytes(path)
    base = path.name[: -len(".dict.dz")] if path.name.endswith(".dz") else path.stem
    index = path.with_name(base + ".index")
    if not index.is_file():
        return [_dedent(data.decode("utf-8", errors="replace"))]
    spans = set()
    for line in index.read_text(encoding="utf-8", errors="replace").splitlines():
        fields = line.split("\t")
        if len(fields) < 3 or fields[0].startswith(("00-database", "00database")):
            continue
        spans.add((_b64(fields[1]), _b64(fields[2])))
    entries = []
    for start, length in sorted(spans):
        entry = _dedent(data[start : start + length].decode("utf-8", errors="replace"))
        if entry:
            entries.append(entry)
    return entries


def _b64(text: str) -> int:
    value = 0
    for ch in text:
        value = value * 64 + _DICT_B64.index(ch)
    return value


def _dedent(text: str) -> str:
    """Lines stripped of their indentation (dictionaries indent every definition line)."""
    return re.sub(r"\n{3,}", "\n\n", "\n".join(line.strip() for line in text.splitlines())).strip()


def fortune_entries(path: Path) -> list[str]:
    text = _read(path)
    return [e.strip("\n") for e in re.split(r"\n%\n", "\n" + text + "\n") if e.strip()]


def info_text(path: Path) -> str:
    """A GNU info file's nodes, without their header lines, tag tables and indirect lists."""
    nodes = []
    for node in _read(path).split("\x1f"):
        node = node.lstrip("\n\x0c")
        if node.startswith(("Tag Table:", "Indirect:", "\x00")) or not node.strip():
            continue
        if node.startswith("File:"):
            node = node.split("\n", 1)[1] if "\n" in node else ""
        nodes.append(node.strip())
    return "\n\n".join(n for n in nodes if n)


def pod_text(path: Path) -> str:
    """Perl POD as text: headings and items kept, other commands and format codes dropped."""
    out, skip = [], False
    for line in _read(path).splitlines():
        if line.startswith("="):
            word, _, rest = line.partition(" ")
            if word in ("=begin", "=for"):
                skip = word == "=begin"
            elif word == "=end":
                skip = False
            elif word.startswith(("=head", "=item")) and rest.strip():
                out.append(rest.strip())
            continue
        if not skip:
            out.append(line)
    text = "\n".join(out)
    for _ in range(3):  # nested codes: B<C<x>>
        text = re.sub(r"[A-Z]<<+ (.*?) >>+", r"\1", text)
        text = re.sub(r"[BCFISXZL]<([^<>]*)>", lambda m: m.group(1).split("|")[0], text)
        text = re.sub(r"E<(\w+)>", lambda m: {"gt": ">", "lt": "<", "verbar": "|",
                                                "sol": "/"}.get(m.group(1), ""), text)  # fmt: skip
    return text.strip()


def kjv_chapters() -> list[str]:
    """The King James Bible, one chapter a document, a verse a line (numbers dropped)."""
    if shutil.which("bible") is None:
        raise TrainError(f"{PREFIX}bible-kjv-text is read by the bible program: "
                         "apt-get install bible-kjv bible-kjv-text")  # fmt: skip
    out = subprocess.run(["bible", "-l0", "Gen1:1-Rev22:21"], capture_output=True, text=True,
                         check=True).stdout  # fmt: skip
    chapters, verses = [], []
    for line in out.splitlines():
        if m := re.match(r"^\s+\d+ (.*)$", line):
            verses.append(m.group(1).strip())
        elif line.strip() and verses:  # "Exodus 1": a new chapter
            chapters.append("\n".join(verses))
            verses = []
    if verses:
        chapters.append("\n".join(verses))
    return chapters


def file_texts(kind: str, path: Path) -> list[str]:
    """The documents of one file of a format."""
    if kind == "dict":
        return dict_entries(path)
    if kind == "fortune":
        return fortune_entries(path)
    text = {"html": lambda: html_text(_read(path)), "info": lambda: info_text(path),
            "pod": lambda: pod_text(path), "text": lambda: _read(path).strip()}[kind]()  # fmt: skip
    return [text] if text.strip() else []


def package_texts(*specs: str, info: Path | None = None) -> list[str]:
    """The documents of one or more packages (`NAME`, `debian:NAME` or an unpacked `DIR`),
    their files merged in path order. TrainError when a package is not installed or has no
    text this reader knows."""
    names = [s[len(PREFIX) :] if is_spec(s) else s for s in specs]
    if any(n in ("bible-kjv", "bible-kjv-text") for n in names):
        texts = kjv_chapters()
        names = [n for n in names if n not in ("bible-kjv", "bible-kjv-text")]
        if not names:
            return texts
    else:
        texts = []
    files, root = [], Path("/")
    for name in names:
        if "/" in name:  # an unpacked package
            root = Path(name).expanduser()
            if not root.is_dir():
                raise TrainError(f"{PREFIX}{name}: no such folder")
            files += tree_files(root)
        else:
            files += package_files(name, info)
    kind, chosen = choose(files, root)
    if kind is None:
        raise TrainError(f"{PREFIX}{' '.join(names)}: no text this reader knows (dictd, "
                         "fortune, HTML, info, POD or plain text files)")  # fmt: skip
    for path in chosen:
        texts += file_texts(kind, path)
    return texts
