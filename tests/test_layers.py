"""The house's rules, checked: layer contracts (import-linter, pyproject.toml) and a core
that imports, module by module, with Qt blocked."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_layer_contracts_hold():
    from importlinter.cli import lint_imports

    assert lint_imports(config_filename=str(ROOT / "pyproject.toml"), no_cache=True) == 0


def test_every_core_module_imports_with_qt_blocked():
    code = (
        "import sys\n"
        "for name in ('PySide6', 'shiboken6', 'pyqtgraph', 'PyQt5', 'PyQt6'):\n"
        "    sys.modules[name] = None\n"
        "import pkgutil, importlib, specviz.core, specviz.remote\n"
        "names = []\n"
        "for package in (specviz.core, specviz.remote):\n"
        "    for m in pkgutil.walk_packages(package.__path__, package.__name__ + '.'):\n"
        "        importlib.import_module(m.name)\n"
        "        names.append(m.name)\n"
        "import specviz.cli.main\n"
        "print(len(names))\n"
        "print('\\n'.join(names))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    count, *names = result.stdout.split()
    files = [p for p in (ROOT / "specviz" / "core").rglob("*.py") if p.name != "__init__.py"]
    assert int(count) >= len(files) > 30  # every module below core, sub-packages included
    assert "specviz.core.engine.speculative" in "\n".join(names)


MAX_LINES = 450  # a module, at most
MAX_MODULES = 16  # modules in one folder, its __init__ included, at most


def test_modules_are_small_and_folders_few():
    too_long = [
        f"{p.relative_to(ROOT)}: {n} lines"
        for p in (ROOT / "specviz").rglob("*.py")
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    ]
    crowded = [
        f"{d.relative_to(ROOT)}: {n} modules"
        for d in [ROOT / "specviz", *(ROOT / "specviz").rglob("*/")]
        if d.is_dir() and (n := len(list(d.glob("*.py")))) > MAX_MODULES
    ]
    assert not too_long and not crowded, too_long + crowded
