"""`--dtype auto`: float32 or bfloat16, whichever verifies the session's K drafts faster here.

Which dtype is faster is a property of the machine, not of the model: on a CPU with bf16
units (avx512_bf16, AMX) SmolLM2's target verifies 4 tokens in bf16 for 1.14x one token and
in fp32 for 1.67x; on a CPU without them bf16 is several times slower. So the target's pass
of 1 and of K+1 tokens is timed in both, once per machine: the numbers are kept in a small
JSON file in the cache (dtype-probe.json), keyed by the model, the CPU or GPU, the threads
and torch's version ($SPECVIZ_DTYPE_AUTO=float32 or bfloat16 pins the choice, unprobed).
float32 stays unless bfloat16 speeds the session by a clear margin: its pass of K+1 tokens
(a round's verification) at least GAIN faster and its pass of one token (the target alone,
a session's last tokens) no more than SLOWER_1 slower (the timings' noise). float32 is
what the target alone computes bit for bit; half precision rounds a pass of K+1 tokens
differently from a pass of 1 (core.decoding.greedy_check), so exactness is traded only for
a speed worth it: on a CPU where bf16 gains 12% at K+1 and nothing at one token
(builtin:tiny on a 2-core EPYC without AMX), float32 stays.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import os
import platform
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import torch
from transformers import DynamicCache

from specviz.core import resources
from specviz.core.models.packed_linear import unpack_linears

PROBED = ("float32", "bfloat16")
# bfloat16 is kept only when its pass of K+1 tokens costs at most 1 - GAIN of float32's, and
# its pass of one token at most SLOWER_1 more than float32's.
GAIN = 0.20
SLOWER_1 = 0.05
CONTEXT = 32  # tokens of context before a timed pass
REPS = 7  # timed passes per dtype and width (interleaved), after one warm-up each
# The fastest and the median pass of a cell further apart than this: the machine was busy
# (other work slows torch 10-100x in bursts), and the probe is used but not kept.
STEADY = 1.5
CACHE_FILE = "dtype-probe.json"
PIN_VARIABLE = "SPECVIZ_DTYPE_AUTO"  # float32 or bfloat16: what auto picks, unprobed
CACHE_VERSION = 2  # 2: float32 timed with its few-row products packed (packed_linear)
CPU_FLAGS = ("avx512_bf16", "amx_bf16", "amx_tile", "avx512f", "avx2", "fp16", "bf16")

# A timer of one pass: (model, width n) -> ms. Injected by the tests.
PassTimer = Callable[[torch.nn.Module, int], float]


def machine() -> dict:
    """What the timings depend on besides the model: the processor (and its bf16 units),
    the GPU when there is one, torch's threads and version."""
    flags, cpu = set(), platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("model name") and ":" in line:
                    cpu = line.split(":", 1)[1].strip()
                elif line.startswith(("flags", "Features")) and ":" in line:
                    flags = set(line.split(":", 1)[1].split())
                    break
    except OSError:
        pass
    return {"cpu": cpu, "cpu_flags": [f for f in CPU_FLAGS if f in flags],
            "threads": torch.get_num_threads(), "torch": torch.__version__}  # fmt: skip


def cache_key(model_id: dict, device: str, where: dict) -> str:
    """One entry per model identity, device and machine (machine())."""
    text = json.dumps({"model": model_id, "device": device, **where}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def read_cache(path: Path) -> dict:
    """The cache's entries ({} when the file is absent, damaged or of another version)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict) or data.get("version") != CACHE_VERSION:
        return {}
    entries = data.get("entries")
    return entries if isinstance(entries, dict) else {}


def write_cache(path: Path, entries: dict) -> None:
    """Written beside and renamed into place; a cache that cannot be written is skipped
    (the probe runs again next time)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        part = path.with_name(f"{path.name}.{os.getpid()}.part")
        part.write_text(json.dumps({"version": CACHE_VERSION, "entries": entries}, indent=1))
        os.replace(part, path)
    except OSError:
        pass


def cached_ms(entry: dict | None, widths: tuple[int, ...]) -> dict | None:
    """{dtype: {n: ms}} from a cache entry when it holds every dtype and width, else None."""
    probe = (entry or {}).get("probe_ms")
    if not isinstance(probe, dict):
        return None
    out = {}
    for dtype in PROBED:
        row = probe.get(dtype)
        if not isinstance(row, dict):
            return None
        try:
            out[dtype] = {n: float(row[str(n)]) for n in widths}
        except (KeyError, TypeError, ValueError):
            return None
        if not all(ms > 0 for ms in out[dtype].values()):
            return None
    return out


def decide(probe_ms: dict[str, dict[int, float]], k: int) -> tuple[str, str]:
    """(dtype, why in words) from the timings of the target's pass of 1 and of K+1 tokens
    in each dtype: bfloat16 when its K+1 pass is clearly faster, else float32."""
    n = k + 1
    fp, bf = probe_ms["float32"], probe_ms["bfloat16"]
    gain_n, gain_1 = 1 - bf[n] / fp[n], 1 - bf[1] / fp[1]
    figures = (
        f"a pass of {n} tokens {bf[n]:.1f} ms in bfloat16 against {fp[n]:.1f} ms in float32 "
        f"({_percent(gain_n)}), 1 token {bf[1]:.1f} against {fp[1]:.1f} ms ({_percent(gain_1)})"
    )
    if gain_n >= GAIN and gain_1 >= -SLOWER_1:
        return "bfloat16", f"faster here for K {k}: {figures}; greedy text may part from float32's"
    return "float32", (
        f"float32 kept (exact) for K {k}: bfloat16 would need {GAIN:.0%} at {n} tokens and at "
        f"most {SLOWER_1:.0%} slower at 1: {figures}"
    )


def _percent(gain: float) -> str:
    return f"{gain:.0%} faster" if gain >= 0 else f"{-gain:.0%} slower"


@torch.inference_mode()
def time_pass(model: torch.nn.Module, n: int) -> float:
    """ms of one target pass of n new tokens after CONTEXT tokens of context."""
    vocab = model.get_input_embeddings().weight.shape[0]
    device = model.get_input_embeddings().weight.device
    ids = torch.arange(CONTEXT + n, device=device).remainder(vocab).unsqueeze(0)  # [1, C+n]
    mask = torch.ones_like(ids)  # no padding (and no warning when an id is the pad id)
    cache = DynamicCache()
    model(input_ids=ids[:, :CONTEXT], attention_mask=mask[:, :CONTEXT], cache=cache,
          use_cache=True, logits_to_keep=1)  # fmt: skip
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    start = time.perf_counter()
    model(input_ids=ids[:, CONTEXT:], attention_mask=mask, cache=cache, use_cache=True,
          logits_to_keep=n)  # fmt: skip
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return 1000 * (time.perf_counter() - start)


def _half_copy(model: torch.nn.Module, rehead: Callable | None) -> torch.nn.Module:
    """A bfloat16 copy, its large CPU head given the product the loader gave the original
    (rehead: core.models.pair.speed_up_head; a copied head would keep computing with the
    float32 weight), its layers plain (a copy of a packed layer has no packed weight)."""
    half = copy.deepcopy(model).to(torch.bfloat16)
    unpack_linears(half)
    head = half.get_output_embeddings()
    vars(head).pop("forward", None)
    if rehead is not None:
        rehead(half)
    return half


def probe(
    model: torch.nn.Module, widths: tuple[int, ...], timer: PassTimer, rehead=None
) -> tuple[dict, bool]:
    """({dtype: {n: fastest ms}}, steady): the model in float32 and a bfloat16 copy of it,
    passes interleaved so that a busy moment of the machine weighs on both; the fastest of
    each (as timeit reports: other work only adds time); steady when no cell's median is
    more than STEADY times its fastest."""
    models = {"float32": model, "bfloat16": _half_copy(model, rehead)}
    times: dict[str, dict[int, list[float]]] = {d: {n: [] for n in widths} for d in PROBED}
    for rep in range(REPS + 1):
        for n in widths:
            for dtype in PROBED:
                ms = timer(models[dtype], n)
                if rep:  # the first of each is a warm-up
                    times[dtype][n].append(ms)
    del models["bfloat16"]
    steady = all(
        statistics.median(v) <= STEADY * min(v) for row in times.values() for v in row.values()
    )
    return {d: {n: min(v) for n, v in row.items()} for d, row in times.items()}, steady


def choose_dtype(
    model: torch.nn.Module,
    model_id: dict,
    k: int,
    cache_file: Path | None = None,
    timer: PassTimer | None = None,
    rehead: Callable | None = None,
) -> dict:
    """The dtype for a session of K drafts with this float32 target, as the header's
    dtype_choice: {"dtype", "why", "k", "probe_ms": {dtype: {n: ms}}, "cached"}."""
    path = cache_file or resources.cache_dir() / CACHE_FILE
    widths = tuple(sorted({1, k + 1}))
    device = str(model.get_input_embeddings().weight.device)
    key = cache_key(model_id, device, machine())
    entries = read_cache(path)
    probe_ms = cached_ms(entries.get(key), widths)
    cached, steady = probe_ms is not None, True
    if probe_ms is None:
        probe_ms, steady = probe(model, widths, timer or time_pass, rehead)
    if not cached and steady:
        old = (entries.get(key) or {}).get("probe_ms")
        merged = {d: {**(old.get(d, {}) if isinstance(old, dict) else {})} for d in PROBED}
        for d in PROBED:
            merged[d].update({str(n): round(ms, 3) for n, ms in probe_ms[d].items()})
        entries[key] = {"model": model_id, "device": device, **machine(), "probe_ms": merged}
        write_cache(path, entries)
    dtype, why = decide(probe_ms, k)
    if not steady:  # other work on the cores: even the fastest passes may be 10x off
        dtype = "float32"
        why = (
            "float32 kept (exact): the machine was busy while timing (passes of one width "
            f"{STEADY:g}x apart), so the timings decide nothing; timed again next time ({why})"
        )
    shown = {d: {str(n): round(ms, 3) for n, ms in row.items()} for d, row in probe_ms.items()}
    return {"dtype": dtype, "why": why, "k": k, "cached": cached, "steady": steady,
            "probe_ms": shown}  # fmt: skip


def apply_auto_dtype(pair, k: int, split: bool, progress=None, rehead=None):
    """A pair loaded in float32, in the dtype choose_dtype picks (the draft follows the
    target); the choice in pair.dtype_choice. A split target (device map, tensor parallel)
    is not probed: it stays float32."""
    info = pair.target_info
    model_id = {"name": info.name, "params": info.params}  # a built-in pair: wherever it lives
    if not info.name.startswith("builtin:"):
        model_id["path"] = info.path
    pinned = os.environ.get(PIN_VARIABLE, "").strip()
    if pinned in PROBED:
        choice = {"dtype": pinned, "why": f"pinned by ${PIN_VARIABLE}", "k": k}
    elif split:
        choice = {"dtype": "float32", "why": "a split target is not probed", "k": k}
    else:
        if progress:
            progress(f"--dtype auto: timing the target's passes of 1 and {k + 1} tokens")
        choice = choose_dtype(pair.target, model_id, k, rehead=rehead)
    if choice["dtype"] != "float32":
        torch_dtype = getattr(torch, choice["dtype"])
        for model in (pair.target, pair.draft):
            if model is not None:
                unpack_linears(model)  # float32 copies the half-precision layers would not use
                model.to(torch_dtype)
                if rehead is not None:  # packing had taken the large head's product's place
                    rehead(model)
        pair.target_info = dataclasses.replace(pair.target_info, dtype=choice["dtype"])
        if pair.draft_info is not None:
            pair.draft_info = dataclasses.replace(pair.draft_info, dtype=choice["dtype"])
    if progress:
        note = " (measured before on this machine)" if choice.get("cached") else ""
        progress(f"--dtype auto: {choice['dtype']}, {choice['why']}{note}")
    pair.dtype_choice = choice
    return pair
