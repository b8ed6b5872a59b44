"""Attention by path and kernel: each attention path (lower_attention.FORCE_PATH: the
two-matmul form, "rows", "row", "flash") and, for the two-matmul form, each matmul variant
forced (autotune.PREFER, "" the tuner's pick), with or without a padding mask: wall time per
run (the bench's method), the largest error against numpy (float64) and the GPU time of every
dispatch (timestamp queries), beside torch SDPA in the same run where CUDA is present. Prints
JSON.
    python bench/probes/attention_paths_probe.py [--shapes 32x12x128x64,1x12x2048x64]
        [--paths matmul,rows,row,flash] [--prefer ,matmul_vec4_64,matmul_vec4_db] [--no-mask]
        [--split ,1,2,4] [--flash ,1,2] [--flash-subgroups on|off]
        [--flash-variant noprefetch,roll_d,roll_pv] [--no-ref]
--no-ref skips the float64 numpy reference (seconds of CPU in Pyodide's numpy, with the GPU
idle: the A/B of whether that idle time changes the GPU times that follow); max_abs_err is then
None. Each case prints its time.time() to stderr (to line up with a clock log).
--flash-variant edits attention/attention_flash.wgsl's text before it is rendered (an A/B of
kernel forms in one process): noprefetch loads the next K/V tile after the tile's last barrier
(no kr/vr registers); roll_d and roll_pv leave the S = Q K^T (d) or O += P V (jj) loop a
loop (no `// @unroll`)."""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import webrlx as wr  # noqa: E402
from webrlx.cli.bench import _ref_timer, time_executable  # noqa: E402
from webrlx.compiler import lower_attention, lower_matmul  # noqa: E402
from webrlx.runtime import autotune  # noqa: E402


def _reference(q, k, v, m=None):
    """numpy attention in float64, per batch (the bench's masked keys: -inf)."""
    out = np.empty(q.shape, np.float64)
    for z in range(q.shape[0]):
        s = q[z].astype(np.float64) @ np.swapaxes(k[z], -1, -2) / np.sqrt(q.shape[-1])
        if m is not None:
            s = s + np.where(m[z] != 0, 0, -np.inf)
        e = np.exp(s - s.max(-1, keepdims=True))
        out[z] = (e / e.sum(-1, keepdims=True)) @ v[z]
    return out


def _flash_variant(text: str, names: list[str]) -> str:
    """attention_flash.wgsl's text with the --flash-variant edits applied (each must match)."""
    def edit(old: str, new: str) -> None:
        nonlocal text
        if old not in text:
            raise SystemExit(f"--flash-variant: {old!r} not in attention_flash.wgsl")
        text = text.replace(old, new)
    for name in names:
        if name == "noprefetch":
            edit("if (more) {                         // the next tile, into registers\n"
                 "            // @unroll\n", "if (false) {\n")
            edit("put_kv(lid + NT * u, kr[u], vr[u]);",
                 "put_kv(lid + NT * u, k_quad(kb, t0 + BKV, lid + NT * u), "
                 "v_quad(vb, t0 + BKV, lid + NT * u));")
        elif name == "roll_d":
            edit("// @unroll\n        for (var d = 0u;", "for (var d = 0u;")
        elif name == "roll_pv":
            edit("// @unroll\n        for (var jj = 0u;", "for (var jj = 0u;")
        else:
            raise SystemExit(f"--flash-variant: unknown {name!r}")
    return text


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--shapes", default="32x12x128x64,8x12x128x64,1x12x512x64,1x12x2048x64")
    p.add_argument("--paths", default="matmul,rows,row")
    p.add_argument("--prefer", default="", help="matmul variants to force on the matmul path")
    p.add_argument("--no-mask", action="store_true")
    p.add_argument("--split", default="", help="K pieces of the batched P V product on the "
                   "matmul path (lower_matmul.SPLIT_K_BATCHED; '' its rule), e.g. ,1,2,4")
    p.add_argument("--flash", default="", help="key chunks of the flash kernel, e.g. ,1,2,4 "
                   "(lower_attention.FLASH_SPLITS; '' its rule)")
    p.add_argument("--flash-subgroups", choices=("on", "off"), default="on",
                   help="the flash kernel's row max and sum over subgroup shuffles (on, where "
                   "the device's subgroups allow) or workgroup memory (off)")
    p.add_argument("--flash-variant", default="", help="edits of the flash kernel's text: "
                   "noprefetch, roll_d, roll_pv (comma-separated)")
    p.add_argument("--no-ref", action="store_true", help="no numpy reference (no error)")
    a = p.parse_args()
    lower_attention.FLASH_SUBGROUPS = a.flash_subgroups == "on"
    if a.flash_variant:
        from webrlx import kernels
        plain = kernels.raw_shader
        edited = _flash_variant(plain("attention/attention_flash"), a.flash_variant.split(","))
        kernels.raw_shader = lambda name: edited if name == "attention/attention_flash" \
            else plain(name)  # type: ignore[assignment]
    rng = np.random.default_rng(0)
    out = {"device": wr.device().info.name, "mask": not a.no_mask,
           "flash_subgroups": a.flash_subgroups, "flash_variant": a.flash_variant, "cases": {}}
    for shape in a.shapes.split(","):
        b, h, s, d = (int(v) for v in shape.split("x"))
        arrays = [rng.standard_normal((b, h, s, d)).astype(np.float32) for _ in range(3)]
        if not a.no_mask:
            mask = np.ones((b, s), np.int32)
            mask[:, s - s // 4:] = 0
            arrays.append(mask)
        feeds = dict(zip("qkvm", arrays))
        want = None if a.no_ref else _reference(*arrays)
        row: dict = {}
        for path in a.paths.split(","):
            variants = list(dict.fromkeys(
                f"{pr}/{sp}" if sp else pr for pr in a.prefer.split(",")
                for sp in a.split.split(","))) \
                if path == "matmul" else \
                a.flash.split(",") if path == "flash" else [""]
            for prefer in variants:
                lower_attention.FORCE_PATH, autotune.PREFER = path, None
                if path == "matmul":
                    pr, _, sp = prefer.partition("/")
                    autotune.PREFER = pr or None
                    lower_matmul.SPLIT_K_BATCHED = int(sp) if sp else None
                if path == "flash":
                    lower_attention.FLASH_SPLITS = int(prefer) if prefer else None
                tag = path + (f" {prefer}" if prefer else "")
                g = wr.Graph()
                ins = [g.input(n, (b, h, s, d)) for n in "qkv"]
                mask_in = None if a.no_mask else g.input("m", (b, s), "int32")
                try:
                    exe = wr.compile(g, outputs=[wr.nn.attention(*ins, mask=mask_in)])
                    got = exe.run(feeds)[0]
                    err = None if want is None else float(np.abs(got - want).max())
                    ms = time_executable(exe, feeds, 10, 5) * 1e3   # (clock up first)
                    prof = exe.profile(feeds, repeats=3)
                    row[tag] = {"ms": round(ms, 4),
                                "gpu_ms": round(prof.total_ms, 4), "max_abs_err": err,
                                "kernels": str(prof).splitlines()}
                except Exception as e:   # noqa: BLE001 - a path may not fit the shape
                    row[tag] = {"error": str(e)[-200:]}
                print(shape, tag, row[tag].get("ms", row[tag].get("error")),
                      f"t={time.time():.3f}", file=sys.stderr, flush=True)
        lower_attention.FORCE_PATH, autotune.PREFER = None, None
        lower_matmul.SPLIT_K_BATCHED, lower_attention.FLASH_SPLITS = None, None

        def torch_attn(q, k, v, m=None):
            import torch
            keep = None if m is None else (m[:, None, None, :] != 0)
            return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=keep)
        ref = _ref_timer(lambda *x: None, torch_attn, arrays, 10, 5, "float32")
        # (without CUDA, as inside Pyodide, _ref_timer times its numpy stand-in: a no-op here)
        row["torch_ms"] = ref["ref_ms"] if ref["reference"].startswith("torch") else None
        out["cases"][shape] = row
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
