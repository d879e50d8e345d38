"""`specviz models` lists the built-in pairs with their provenance and measured figures."""

from __future__ import annotations

import json

from specviz.cli.main import main


def test_models_lists_builtin_pairs(capsys):
    assert main(["models"]) == 0
    out = capsys.readouterr().out
    assert "builtin:tiny  (default)" in out and "licence:" in out and "MB in" in out


def test_models_json(capsys):
    assert main(["models", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    tiny = next(p for p in result["pairs"] if p["name"] == "builtin:tiny")
    assert tiny["present"] and tiny["size_bytes"] > 1_000_000
    assert tiny["params"]["target"] > tiny["params"]["draft"] > 0
