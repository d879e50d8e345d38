"""Shared fixtures: small GPT-2 pairs built in the test session, no downloads."""

from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
# --dtype auto (the built-in pairs' default) is timed per machine; the tests pin it (their
# subprocesses too) so that a run reads the same everywhere. tests/test_dtype_auto.py probes.
os.environ.setdefault("SPECVIZ_DTYPE_AUTO", "float32")

import gc  # noqa: E402

import pytest  # noqa: E402

from tests import file_order  # noqa: E402
from tests.fixtures import make_pair_dirs  # noqa: E402


@pytest.fixture(scope="session")
def pair_dirs(tmp_path_factory):
    """(target_dir, draft_dir): random GPT-2 models with a shared byte-level BPE tokenizer."""
    return make_pair_dirs(tmp_path_factory.mktemp("pair"))


@pytest.fixture(scope="session")
def pair(pair_dirs):
    from specviz.core.models.pair import load_pair

    target, draft = pair_dirs
    return load_pair(str(target), str(draft))


def pytest_addoption(parser):
    parser.addoption("--write-durations", action="store_true",
                     help="write each test file's seconds to tests/durations.json, the order "
                     "the workers take the files in (tests/file_order.py)")  # fmt: skip


def pytest_collection_modifyitems(config, items):
    file_order.costliest_first(items, file_order.read_costs())


def pytest_configure(config):
    if config.getoption("--write-durations"):
        config.pluginmanager.register(file_order.DurationRecorder(), "specviz-durations")
    import torch
    from transformers.utils import logging as hf_logging

    from specviz.gui.qtfixes import refguard

    hf_logging.disable_progress_bar()
    refguard.install()  # as the entry points do, before the tests' Qt calls
    # Small models: one thread avoids oversubscription when the two cores are busy.
    torch.set_num_threads(1)


@pytest.fixture(autouse=True)
def _garbage_collected_on_the_gui_thread(qapp):
    """As the app: no automatic collection on an engine thread (gui/qtfixes/gcguard.py); and each
    test's garbage collected here, on the GUI thread, before the next one starts threads."""
    from specviz.gui.qtfixes import gcguard

    gcguard.install()
    yield
    gc.collect()
