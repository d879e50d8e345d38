"""Old traces read, check and replay as before: traces of schema 1.0 to 1.9 under
tests/data/old_traces (engine sessions on the tiny pair, each rewritten to the form its minor
version had: 1.0 without k, stop or probes, 1.5 and 1.8 trees whose judged tokens carry the
tried p, ...), one for each thing a round records beyond its tokens (probes, copied_from,
block, typical, tree, greedy_diff, matched, draft_pieces; core.trace.extras).

expected.json was written by the code before issue 51's typed extras: each round line
written back from its parsed record (a hash of its bytes), check_session's problems, the
acceptance pairs the metrics count and what the distribution panel shows at each position;
then malformed extras and the reader's message (line and field), and extras that contradict
their round and the checks' problems. Any change in what a trace reads as, writes back as or
checks as fails here."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from specviz.core.metrics.position_bars import position_bars, positions
from specviz.core.metrics.positions import judged_pairs
from specviz.core.trace.check_session import check_session
from specviz.core.trace.files import load, parse_lines
from specviz.core.trace.parse import parse_round
from specviz.core.trace.records import TraceError
from specviz.core.trace.serialize import dumps, round_to_json

FOLDER = Path(__file__).parent / "data" / "old_traces"
EXPECTED = json.loads((FOLDER / "expected.json").read_text())


def _hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@pytest.mark.parametrize("name", sorted(EXPECTED["traces"]))
def test_an_old_trace_reads_writes_checks_and_replays_as_before(name):
    expected = EXPECTED["traces"][name]
    session = load(FOLDER / name)
    lines = (FOLDER / name).read_text().splitlines()
    written, judged, tests = [], [], []
    for number, raw in enumerate(lines[1:], 2):
        rnd = parse_round(json.loads(raw), session.session_id, number)
        text = dumps(round_to_json(rnd))
        assert _hash(text) == expected["written"][number - 2], f"line {number} writes {text}"
        written.append(text)
        judged.append([list(pair) for pair in judged_pairs(rnd)])
        for position in range(positions(rnd)):
            b = position_bars(session.details(rnd.index), position)
            tests.append([rnd.index, position, b.block, b.block_kept, b.typical_threshold,
                          b.typical, b.accept_prob, b.u, b.accepted])  # fmt: skip
    assert [str(p) for p in check_session(session)] == expected["problems"]
    assert judged == expected["judged"]
    assert json.loads(json.dumps(tests)) == expected["tests"]
    # a round written back reads as the same record
    for number, text in enumerate(written, 2):
        rnd = parse_round(json.loads(text), session.session_id, number)
        assert dumps(round_to_json(rnd)) == text


def mutate(line: dict, key: str, how) -> None:
    """line[key] = how, or one of: "ALL:field:v" (every entry of a column v), "DROP:field",
    "PATCH:field:index:json" (an entry; no index: the field)."""
    if isinstance(how, str) and how.startswith("ALL:"):
        _, field, new = how.split(":")
        line[key][field] = [float(new)] * len(line[key][field])
        return
    if not isinstance(how, str) or not how.startswith(("PATCH:", "DROP:")):
        line[key] = how
        return
    value = line[key]
    if how.startswith("DROP:"):
        del value[how[5:]]
        return
    _, field, index, new = how.split(":", 3)
    try:
        new = float("nan") if new == "nan" else json.loads(new)
    except ValueError:
        pass  # a string
    if index:
        value[field][int(index)] = new
    else:
        value[field] = new


@pytest.mark.parametrize("case", EXPECTED["errors"], ids=lambda c: f"{c[1]}-{c[2]}")
def test_a_malformed_extra_is_named_as_before(case):
    name, key, how, message = case
    lines = (FOLDER / name).read_text().splitlines()
    number, raw = next((n, line) for n, line in enumerate(lines[1:], 2)
                       if json.loads(line).get(key) is not None)  # fmt: skip
    obj = json.loads(raw)
    mutate(obj, key, how)
    with pytest.raises(TraceError) as error:
        parse_round(obj, "s", number)
    assert str(error.value) == message


@pytest.mark.parametrize("case", EXPECTED["checks"], ids=lambda c: f"{c[1]}-{c[2]}")
def test_an_extra_that_contradicts_its_round_is_found_as_before(case):
    name, key, how, problems = case
    lines = (FOLDER / name).read_text().splitlines()
    index = next((i for i, line in enumerate(lines[1:], 1) if json.loads(line).get(key)
                  is not None), 1)  # fmt: skip
    obj = json.loads(lines[index])
    if how is None:
        obj.pop(key)
    else:
        mutate(obj, key, how)
        if isinstance(how, str) and how.startswith("PATCH:target"):
            n = len(obj[key]["target"])
            obj[key]["ids"], obj[key]["text"] = obj[key]["ids"][:n], obj[key]["text"][:n]
    lines[index] = json.dumps(obj)
    assert [str(p) for p in check_session(parse_lines(lines))] == problems
