"""`specviz doctor`: each engine's record read into the same figures (known totals give the
expected acceptance length, rate and both per-position curves), each curve shape named,
the best K, and bad input (NaN, negative, inconsistent counters, a 1 GB log, a URL that
never answers) as one line and exit 2."""

from __future__ import annotations

import http.server
import json
import socket
import threading
from pathlib import Path

import pytest

from specviz.cli.main import main
from specviz.core.bench.doctor import best_k_for, diagnose
from specviz.core.metrics.engine_metrics import EngineRecordError, read_record

DATA = Path(__file__).parent / "data" / "doctor"


def _doctor(capsys, *args):
    code = main(["doctor", *args])
    out, err = capsys.readouterr()
    return code, out, err


def _json(capsys, name, *args):
    code, out, _ = _doctor(capsys, str(DATA / name), "--json", *args)
    assert code == 0
    return json.loads(out)


def test_vllm_metrics_with_known_totals(capsys):
    """Two engines' counters (the _total suffix, model_name / engine labels) summed."""
    d = _json(capsys, "vllm_metrics_healthy.txt", "--cost-ratio", "0.1")
    assert d["engine"] == "vllm" and d["source"] == "metrics"
    assert (d["drafts"], d["draft_tokens"], d["accepted_tokens"]) == (1000, 4000, 2180)
    assert d["acceptance_length"] == pytest.approx(3.18)
    assert d["acceptance_length_no_bonus"] == pytest.approx(2.18)
    assert d["acceptance_rate"] == pytest.approx(0.545)
    assert d["per_position_unconditional"] == pytest.approx([0.8, 0.6, 0.45, 0.33])
    assert d["per_position_conditional"] == pytest.approx([0.8, 0.75, 0.75, 0.33 / 0.45])
    assert [f["code"] for f in d["findings"]] == ["healthy"]
    # (1 + 0.8 + 0.6 + 0.45 + 0.33) / (4 x 0.1 + 1) beats every shorter K at c = 0.1
    assert d["best_k"] == 4 and d["best_k_speedup"] == pytest.approx(3.18 / 1.4)


def test_vllm_log_lines_are_summed_and_a_cliff_is_named(capsys):
    d = _json(capsys, "vllm_log_cliff.log", "--cost-ratio", "0.1")
    assert (d["engine"], d["source"], d["intervals"], d["k"]) == ("vllm", "log", 2, 4)
    assert (d["drafts"], d["draft_tokens"], d["accepted_tokens"]) == (500, 2000, 835)
    assert d["acceptance_length"] == pytest.approx(1 + 835 / 500)
    assert d["per_position_unconditional"] == pytest.approx([0.85, 0.7, 0.1, 0.02])
    cliff = [f for f in d["findings"] if f["code"] == "cliff"]
    assert cliff and "after position 2" in cliff[0]["message"]
    assert d["best_k"] == 2


@pytest.mark.parametrize(
    "name, code",
    [
        ("vllm_metrics_collapse.txt", "position1-collapse"),
        ("vllm_log_low.log", "uniformly-low"),
        ("vllm_metrics_healthy.txt", "healthy"),
        ("vllm_log_cliff.log", "cliff"),
    ],
)
def test_each_shape_is_named(capsys, name, code):
    assert code in [f["code"] for f in _json(capsys, name)["findings"]]


def test_sglang_and_llama_cpp_in_the_same_definitions(capsys):
    s = _json(capsys, "sglang_server.log")
    assert s["engine"] == "sglang" and s["intervals"] == 3
    assert s["acceptance_length"] == pytest.approx((2.91 + 2.77 + 2.84) / 3)  # bonus counted
    assert s["acceptance_length_no_bonus"] == pytest.approx(s["acceptance_length"] - 1)
    assert s["acceptance_rate"] == pytest.approx((0.64 + 0.59 + 0.61) / 3)
    assert s["k"] == 3 and s["per_position_unconditional"] is None
    ll = _json(capsys, "llama_speculative.txt")
    assert (ll["drafts"], ll["draft_tokens"], ll["accepted_tokens"]) == (256 - 201, 384, 201)
    assert ll["acceptance_rate"] == pytest.approx(201 / 384)
    assert ll["acceptance_length"] == pytest.approx(1 + 201 / 55) and ll["k"] == 16
    server = _json(capsys, "llama_server.log")
    assert server["acceptance_rate"] == pytest.approx((114 + 78) / (160 + 120))
    assert server["acceptance_length"] is None  # llama-server does not count its drafts


def test_the_text_report_names_every_definition(capsys):
    code, out, _ = _doctor(capsys, str(DATA / "vllm_log_cliff.log"))
    assert code == 0
    assert "acceptance length, bonus counted  2.67" in out
    assert "unconditional (vLLM)" in out and "conditional (specviz)" in out
    assert "finding [cliff]" in out and "give --cost-ratio" in out


def test_best_k_trades_acceptance_against_the_draft_cost():
    curve = (0.9, 0.8, 0.3, 0.05)
    assert best_k_for(curve, 0.0)[0] == 4  # a free draft: every position pays
    assert best_k_for(curve, 0.2)[0] == 2
    assert best_k_for(curve, 5.0)[0] == 1


def _metrics(drafts, tokens, accepted, per_pos=()):
    lines = [
        f'vllm:spec_decode_num_drafts_total{{engine="0",model_name="m"}} {drafts}',
        f'vllm:spec_decode_num_draft_tokens_total{{engine="0",model_name="m"}} {tokens}',
        f'vllm:spec_decode_num_accepted_tokens_total{{engine="0",model_name="m"}} {accepted}',
    ]
    lines += [
        f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{engine="0",position="{i}"}} {v}'
        for i, v in enumerate(per_pos)
    ]
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize(
    "text, message",
    [
        (_metrics(10, 40, "NaN"), "is NaN: not a count"),
        (_metrics(10, -40, 5), "negative"),
        (_metrics(10, 40, 50, (10, 10, 10, 10, 10)), "50 accepted tokens but only 40 drafted"),
        (_metrics(10, 40, 12, (4, 8)), "position 2 accepted more often"),
        (_metrics(10, 40, 30, (8, 6)), "sum to 14"),
        (_metrics(10, 40, 4), None),  # consistent
        ("just some text\nwithout metrics\n", "found no speculative-decoding record"),
    ],
)
def test_bad_counters_are_refused(text, message):
    if message is None:
        assert read_record(text).accepted_tokens == 4
        return
    with pytest.raises(EngineRecordError, match=message):
        read_record(text)


def test_an_inconsistent_vllm_log_line_is_refused():
    line = (
        "INFO 12-03 [metrics.py:96] SpecDecoding metrics: Mean acceptance length: 3.50, "
        "Accepted throughput: 1.00 tokens/s, Drafted throughput: 1.00 tokens/s, Accepted: 10 "
        "tokens, Drafted: 40 tokens, Per-position acceptance rate: 0.100, 0.100, 0.030, 0.020, "
        "Avg Draft acceptance rate: 25.0%"
    )
    with pytest.raises(EngineRecordError, match="inconsistent"):
        read_record(line)


def test_bad_input_is_one_line_and_exit_2(capsys, tmp_path):
    nan = tmp_path / "nan.txt"
    nan.write_text(_metrics(10, 40, "NaN"), encoding="utf-8")
    huge = tmp_path / "huge.log"
    with open(huge, "wb") as f:  # sparse: 1 GB on paper, nothing on the disk
        f.truncate(1 << 30)
    binary = tmp_path / "bin.log"
    binary.write_bytes(b"\x00\x01\x02" * 100)
    for args, message in [
        ([str(nan)], "NaN"),
        ([str(huge)], "1024 MiB, more than 64 MiB"),
        ([str(binary)], "binary data"),
        ([str(tmp_path / "missing.log")], "no such file"),
        ([str(tmp_path)], "is a folder"),
        (["ftp://example.com/metrics"], "only http"),
        ([str(DATA / "vllm_log_low.log"), "--cost-ratio", "-1"], "--cost-ratio"),
    ]:
        code, out, err = _doctor(capsys, *args)
        assert code == 2 and out == "", args
        assert message in err and len(err.strip().splitlines()) == 1, err


def test_a_url_that_never_answers_times_out(capsys):
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)  # accepts the connection, never answers
    try:
        url = f"http://127.0.0.1:{server.getsockname()[1]}/metrics"
        code, _, err = _doctor(capsys, url, "--timeout", "0.5")
        assert code == 2 and "no answer within 0.5 s" in err
    finally:
        server.close()


def test_a_metrics_url_is_read(capsys):
    body = (DATA / "vllm_metrics_healthy.txt").read_bytes()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - the stdlib's name
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    httpd = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{httpd.server_address[1]}/metrics"
        code, out, _ = _doctor(capsys, url, "--json")
        assert code == 0 and json.loads(out)["accepted_tokens"] == 2180
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join()


def test_diagnosis_without_per_position_figures_says_so():
    record = read_record((DATA / "llama_speculative.txt").read_text(encoding="utf-8"))
    (finding,) = diagnose(record, 0.1).findings
    assert finding.code == "healthy" and "no per-position figures" in finding.message
    assert diagnose(record, 0.1).best_k is None


def test_specviz_curve_beside_the_engines_on_the_tiny_pair(capsys):
    code, out, _ = _doctor(capsys, str(DATA / "vllm_log_cliff.log"), "--pair", "tiny",
                           "--limit", "2", "--max-new-tokens", "12", "--json")  # fmt: skip
    assert code == 0
    d = json.loads(out)
    ours = d["specviz"]
    assert ours["engine"] == "specviz" and ours["k"] == 4 == d["k"]  # the record's K
    assert len(ours["per_position_unconditional"]) == 4
    assert ours["accepted_tokens"] <= ours["draft_tokens"]
    assert ours["acceptance_length"] == pytest.approx(1 + ours["accepted_tokens"] / ours["drafts"])
    assert d["cost_ratio_measured"] and d["cost_ratio"] > 0 and d["best_k"] is not None
