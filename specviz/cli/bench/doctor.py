"""`specviz doctor FILE|URL`: an engine's record of speculative decoding in every engine's
definitions, the shape of its acceptance curve named with likely causes, and the K the cost
model would pick.

Reads vLLM's /metrics text (a saved file or the URL itself, e.g.
http://localhost:8000/metrics), vLLM's "SpecDecoding metrics:" log lines, SGLang's server
log ("Decode batch ... accept len: ..."), llama.cpp's end-of-run statistics (n_drafted,
n_accept) or llama-server's "draft acceptance rate" lines. The format is found from the
text. Definitions: docs/doctor.md.
"""

from __future__ import annotations

import argparse
import json
import time

from specviz.cli.options import UsageError, fail, finite_float
from specviz.cli.terminal import printable

MAX_BYTES = 64 << 20  # a /metrics page is kilobytes; a log's tail holds its recent lines
CHUNK = 1 << 16


def add_parser(sub) -> None:
    parser = sub.add_parser(
        "doctor",
        help="read an engine's speculative-decoding metrics (vLLM, SGLang, llama.cpp): "
        "acceptance in every definition, and what the curve's shape says",
    )
    parser.description = __doc__
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument(
        "source", metavar="FILE|URL", help="a saved /metrics page or log, or an http(s) URL"
    )
    parser.add_argument(
        "--cost-ratio", type=finite_float, metavar="C",
        help="a draft step's cost / a target step's (specviz tune measures it as c): with it, "
        "the K the cost model would pick from the per-position rates",
    )  # fmt: skip
    parser.add_argument("--timeout", type=finite_float, default=10.0,
                        help="seconds a URL may take in all (default 10)")  # fmt: skip
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    here = parser.add_argument_group(
        "specviz's curve beside the engine's (where the pair loads here)",
        "With --pair, or --target and --draft, or --prompts: run the pair's draft model on the "
        "prompts here (tune's engine) and set its curve beside the engine's; without "
        "--cost-ratio, c is measured here too.",
    )
    from specviz.cli.options import add_model_args

    add_model_args(parser)
    here.add_argument("--prompts", metavar="F", help="a prompt set as `tune` takes it "
                      "(default: the shipped resources/prompts/tune.jsonl)")  # fmt: skip
    here.add_argument("--k", type=int, help="K (default: the record's K, else 4)")
    here.add_argument("--temperature", type=finite_float, default=0.0, help="default 0")
    here.add_argument("--max-new-tokens", type=int, default=64, help="per prompt (default 64)")
    here.add_argument("--limit", type=int, default=8, help="the first N prompts (default 8)")


def read_source(source: str, timeout: float) -> str:
    """The text of a file or an http(s) URL, at most MAX_BYTES; UsageError otherwise."""
    if source.startswith(("http://", "https://")):
        return _fetch(source, timeout)
    if "://" in source:
        raise UsageError(f"{source}: only http:// and https:// URLs are read")
    from specviz.core.resources import check_regular_file

    try:
        check_regular_file(source)
        import os

        size = os.path.getsize(source)
        if size > MAX_BYTES:
            raise UsageError(
                f"{source}: {size >> 20} MiB, more than {MAX_BYTES >> 20} MiB: give its tail "
                f"(tail -c 32M {source} > tail.log) or the /metrics page"
            )
        with open(source, "rb") as f:
            data = f.read(MAX_BYTES + 1)
    except FileNotFoundError:
        raise UsageError(f"{source}: no such file") from None
    except IsADirectoryError:
        raise UsageError(f"{source}: is a folder") from None
    except OSError as e:
        raise UsageError(f"{source}: cannot read it ({e.strerror or e})") from None
    return _text(source, data)


def _text(source: str, data: bytes) -> str:
    if len(data) > MAX_BYTES:
        raise UsageError(f"{source}: more than {MAX_BYTES >> 20} MiB")
    if b"\x00" in data[:CHUNK]:
        raise UsageError(f"{source}: binary data, not a metrics page or a log")
    return data.decode("utf-8", errors="replace")  # a log may hold a stray byte: keep reading


def _fetch(url: str, timeout: float) -> str:
    """GET url: each wait at most `timeout` seconds, and a server that drips its answer is
    cut off once `timeout` seconds have passed in all (so at most about twice that)."""
    import socket
    import urllib.error
    import urllib.request

    if not 0 < timeout <= 600:
        raise UsageError("--timeout must be between 0 and 600 seconds")
    deadline = time.monotonic() + timeout
    request = urllib.request.Request(url, headers={"Accept": "text/plain"})
    chunks, size = [], 0
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise UsageError(f"{url}: no complete answer within {timeout:g} s")
                chunk = response.read(CHUNK)
                if not chunk:
                    break
                chunks.append(chunk)
                size += len(chunk)
                if size > MAX_BYTES:
                    raise UsageError(f"{url}: more than {MAX_BYTES >> 20} MiB")
    except urllib.error.HTTPError as e:
        raise UsageError(f"{url}: HTTP {e.code} {e.reason}") from None
    except urllib.error.URLError as e:
        reason = e.reason
        if isinstance(reason, socket.timeout | TimeoutError):
            raise UsageError(f"{url}: no answer within {timeout:g} s") from None
        raise UsageError(f"{url}: cannot connect ({reason})") from None
    except TimeoutError:
        raise UsageError(f"{url}: no answer within {timeout:g} s") from None
    except (OSError, ValueError) as e:
        raise UsageError(f"{url}: {e}") from None
    return _text(url, b"".join(chunks))


def run(args: argparse.Namespace) -> int:
    from specviz.core.bench.doctor import diagnose
    from specviz.core.metrics.engine_metrics import EngineRecordError, read_record

    try:
        if args.cost_ratio is not None and not 0 <= args.cost_ratio <= 10:
            raise UsageError("--cost-ratio must be between 0 and 10")
        text = read_source(args.source, args.timeout)
        record = read_record(text)
    except UsageError as e:
        return fail(str(e))
    except EngineRecordError as e:
        return fail(f"{args.source}: {e}")
    ours, measured = None, False
    if args.pair or args.target or args.draft or args.prompts:
        try:
            ours, measured_c = _here(args, record.k)
        except UsageError as e:
            return fail(str(e))
        if args.cost_ratio is None:
            args.cost_ratio, measured = measured_c, True
    diagnosis = diagnose(record, args.cost_ratio)
    if args.json:
        obj = diagnosis.to_json()
        if ours is not None:
            obj["specviz"] = {"pair": ours[0], **diagnose(ours[1], args.cost_ratio).to_json()}
            obj["cost_ratio_measured"] = measured
        print(json.dumps(obj))
    else:
        print(report(args.source, diagnosis, measured))
        if ours is not None:
            print(beside(diagnosis, diagnose(ours[1], args.cost_ratio), ours[0]))
    return 0


def _here(args, record_k):
    """((pair name, specviz's EngineRecord on it), the cost ratio measured here)."""
    import sys

    from specviz.cli.drafting_options import pair_spec
    from specviz.core.bench.curve import measured_cost_ratio, measured_curve
    from specviz.core.drafters.registry import DrafterConfig
    from specviz.core.engine.threads import set_threads
    from specviz.core.models.pair import ModelLoadError
    from specviz.core.trace.records import Settings
    from specviz.core.tune.promptsets import PromptSetError, load_prompt_set
    from specviz.core.tune.sweep import SweepConfig

    k = args.k or record_k or 4
    if not 1 <= k <= 32:
        raise UsageError(f"--k must be between 1 and 32 (the record's K is {record_k})")
    if args.limit < 1 or not 1 <= args.max_new_tokens <= 4096:
        raise UsageError("--limit must be >= 1 and --max-new-tokens between 1 and 4096")
    session = Settings(temperature=args.temperature, max_new_tokens=args.max_new_tokens)
    config = SweepConfig(ks=(k,), settings=session)
    try:
        config.run_settings(k)
        prompts = load_prompt_set(args.prompts)[: args.limit]
        spec = pair_spec(args, DrafterConfig())
        set_threads(args.threads)
        pair = spec.load(lambda m: print(f"[specviz] {printable(m)}", file=sys.stderr))
        record = measured_curve(pair, prompts, k, config)
        c = measured_cost_ratio(pair, prompts[0])
    except (PromptSetError, ModelLoadError, ValueError) as e:
        raise UsageError(str(e)) from None
    return (spec.target, record), c


def beside(engine, ours, pair: str) -> str:
    """The engine's curve and specviz's on the pair, position by position."""
    r = ours.record
    lines = [
        f"specviz here on {printable(pair, keep_lines=False)} (K {r.k}, {r.intervals} prompts, "
        f"{r.drafts:,.0f} rounds): acceptance length {_f(ours.acceptance_length, '{:.2f}')}, "
        f"acceptance rate {_f(ours.acceptance_rate)}",
        "  position   engine uncond / cond   specviz uncond / cond",
    ]
    theirs_u = engine.per_position_unconditional or ()
    theirs_c = engine.per_position_conditional or ()
    for i in range(max(len(theirs_u), len(ours.per_position_unconditional or ()))):
        left = f"{_f(_at(theirs_u, i))} / {_f(_at(theirs_c, i))}"
        right = (f"{_f(_at(ours.per_position_unconditional, i))} / "
                 f"{_f(_at(ours.per_position_conditional, i))}")  # fmt: skip
        lines.append(f"  {i + 1:8d}   {left:>20s}   {right:>21s}")
    lines += [f"  specviz's finding [{f.code}]" for f in ours.findings]
    return "\n".join(lines)


def _at(values, i):
    return values[i] if values and i < len(values) else None


def _f(value, fmt: str = "{:.3f}") -> str:
    return "n/a" if value is None else fmt.format(value)


ENGINE_WORDS = {
    ("vllm", "metrics"): "vLLM /metrics counters",
    ("vllm", "log"): "vLLM 'SpecDecoding metrics' log lines",
    ("sglang", "server-log"): "SGLang server log ('accept len' per logging interval)",
    ("llama.cpp", "end-of-run"): "llama.cpp end-of-run statistics",
    ("llama.cpp", "server-log"): "llama-server 'draft acceptance rate' lines",
}


def report(source: str, d, measured: bool = False) -> str:
    r = d.record
    counts = ", ".join(
        f"{name} {value:,.0f}"
        for name, value in (("drafts", r.drafts), ("draft tokens", r.draft_tokens),
                            ("accepted", r.accepted_tokens))
        if value is not None
    )  # fmt: skip
    lines = [
        f"{printable(source, keep_lines=False)}: {ENGINE_WORDS.get((r.engine, r.source), r.engine)}"
        f", {r.intervals} {'interval' if r.source in ('log', 'server-log') else 'record'}"
        f"{'s' if r.intervals != 1 else ''}" + (f"; K {r.k}" if r.k else ""),
    ]
    if counts:
        lines.append(f"  {counts}" + ("  (drafts: n_predict - n_accept)" if r.engine == "llama.cpp"
                                      and r.drafts is not None else ""))  # fmt: skip
    lines += [
        f"  acceptance length, bonus counted  {_f(d.acceptance_length, '{:.2f}')}   "
        "(vLLM mean acceptance length, SGLang accept len, Spec-Bench #MAT, specviz tokens/pass)",
        f"  acceptance length, drafts only    {_f(d.acceptance_length_no_bonus, '{:.2f}')}   "
        "(EAGLE / Medusa papers' accepted drafts per step)",
        f"  acceptance rate                   {_f(d.acceptance_rate)}  "
        "(vLLM draft acceptance rate, llama.cpp accept, SGLang accept rate, specviz draft "
        "efficiency)",
    ]
    if d.per_position_unconditional:
        lines.append("  position   unconditional (vLLM)   conditional (specviz)")
        for i, (u, c) in enumerate(
            zip(d.per_position_unconditional, d.per_position_conditional, strict=True), 1
        ):
            lines.append(f"  {i:8d}   {u:20.3f}   {_f(c):>21s}")
    else:
        lines.append("  per position: not in this record")
    for f in d.findings:
        lines.append(f"finding [{f.code}]: {f.message}")
    if d.best_k is not None:
        lines.append(
            f"best K (cost model, c = {d.cost_ratio:.3g}{' measured here' if measured else ''}):"
            f" {d.best_k}, predicted "
            f"{d.best_speedup:.2f}x (over the recorded positions "
            f"1..{len(d.per_position_unconditional)})"
            + ("; no K beats the target alone at this c" if d.best_speedup < 1 else "")
        )
    elif d.per_position_unconditional:
        lines.append("best K: give --cost-ratio C (a draft step / a target step) to have it")
    return "\n".join(lines)
