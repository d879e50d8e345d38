"""Untrusted text on a terminal (issue 14): control sequences from a trace or a model are
printed as visible escapes, never acted on."""

from __future__ import annotations

import dataclasses
import json

import pytest

from specviz.cli.main import main
from specviz.cli.terminal import printable, printable_fields
from specviz.core.trace.files import save
from tests.fixtures import synthetic_session

HOSTILE = "\x1b]0;pwned\x07\x1b[2J\x9b2J\u202etxt\x00\x7f"


@pytest.mark.parametrize("char", ["\x1b", "\x07", "\x00", "\x7f", "\x9b", "\x85", "\u202e"])
def test_controls_become_visible_escapes(char):
    out = printable(f"a{char}b")
    assert char not in out and out.startswith("a\\") and out.endswith("b")


def test_text_stays_readable():
    assert printable("naïve café — 東京\n\tok") == "naïve café — 東京\n\tok"
    assert printable("one\nline", keep_lines=False) == "one\\x0aline"
    assert printable("bad \udcff byte") == "bad \\udcff byte"  # stdout could not encode it


def test_fields_of_a_report():
    fields = printable_fields({"name": HOSTILE, "n": 3, "list": [HOSTILE], "none": None})
    assert fields["n"] == 3 and fields["none"] is None
    assert "\x1b" not in json.dumps(fields, ensure_ascii=False)


def _hostile_trace(path):
    session = synthetic_session(2)
    header = session.header
    model = dataclasses.replace(header.target, name=HOSTILE, path=HOSTILE, dtype=HOSTILE)
    header = dataclasses.replace(
        header, target=model, created=HOSTILE, session_id=HOSTILE, prompt=HOSTILE
    )
    save(type(session)(header, []), path)


@pytest.mark.parametrize("as_json", [False, True])
def test_inspect_prints_no_control_characters(tmp_path, capsys, as_json):
    trace = tmp_path / "hostile.jsonl"
    _hostile_trace(trace)
    main(["inspect", str(trace), *(["--json"] if as_json else [])])
    out, err = capsys.readouterr()
    for char in ("\x1b", "\x07", "\x9b", "\u202e", "\x00", "\x7f"):
        assert char not in out and char not in err
    if not as_json:
        assert "\\x1b]0;pwned\\x07" in out
