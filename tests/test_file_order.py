"""tests/file_order.py: the files costliest first, each file's tests in their own order."""

from __future__ import annotations

import json
from types import SimpleNamespace

from tests import file_order


def _items(*nodeids: str) -> list:
    return [SimpleNamespace(nodeid=n) for n in nodeids]


def test_files_go_costliest_first_and_keep_their_own_order():
    items = _items("tests/a.py::x", "tests/b.py::y", "tests/a.py::z", "tests/c.py::w",
                   "tests/new.py::v", "tests/b.py::u")  # fmt: skip
    costs = {"tests/a.py": 5.0, "tests/b.py": 60.0, "tests/c.py": 1.0}
    file_order.costliest_first(items, costs)
    # new.py counts as the median (5.0): after b, beside a, in the order first seen.
    assert [i.nodeid for i in items] == [
        "tests/b.py::y", "tests/b.py::u", "tests/a.py::x", "tests/a.py::z", "tests/new.py::v",
        "tests/c.py::w",
    ]  # fmt: skip


def test_no_costs_keeps_the_collected_order():
    items = _items("tests/b.py::y", "tests/a.py::x", "tests/b.py::u")
    file_order.costliest_first(items, {})
    assert [i.nodeid for i in items] == ["tests/b.py::y", "tests/b.py::u", "tests/a.py::x"]


def test_a_damaged_durations_file_is_no_costs(tmp_path):
    path = tmp_path / "durations.json"
    assert file_order.read_costs(path) == {}
    for text in ("{", "[1, 2]", '{"tests/a.py": "slow", "tests/b.py": 2}'):
        path.write_text(text)
        assert file_order.read_costs(path) == ({"tests/b.py": 2.0} if "slow" in text else {})


def test_the_recorder_sums_each_files_phases(tmp_path):
    path = tmp_path / "durations.json"
    recorder = file_order.DurationRecorder(path)
    for nodeid, seconds in (("tests/a.py::x", 1.25), ("tests/a.py::x", 0.5),
                            ("tests/b.py::y[1]", 3.0)):  # fmt: skip
        recorder.pytest_runtest_logreport(SimpleNamespace(nodeid=nodeid, duration=seconds))
    recorder.pytest_sessionfinish(SimpleNamespace(config=SimpleNamespace()))
    assert json.loads(path.read_text()) == {"tests/b.py": 3.0, "tests/a.py": 1.8}
    assert list(file_order.read_costs(path)) == ["tests/b.py", "tests/a.py"]


def test_the_committed_costs_name_files_that_exist():
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    costs = file_order.read_costs()
    assert costs, "the committed costs (file_order.DURATIONS) are missing or empty"
    missing = [name for name in costs if not (root / name).is_file()]
    assert len(missing) <= len(costs) // 10, missing  # a few renamed files is stale, not wrong
