"""A Llama graph over a Q4_K_M-style mix of tensor types (Q4_K projections, Q6_K attn_v,
ffn_down and head, a Q5_0 embedding, F32 norms) builds from the GGUF tensor infos, keeps every
weight as its blocks (params hold the tensor bytes, padded to 4) and gives the logits of the
numpy reference (whose dequantization tests/unit/test_quant_blocks.py holds to gguf's)."""
from __future__ import annotations

import numpy as np

import webrlx as wr
from webrlx import quant
from webrlx.models.gguf import TensorInfo
from webrlx.models.llama import LlamaConfig, build_llama, weight_arrays

CFG = LlamaConfig(layers=2, width=256, ffn=512, heads=4, kv_heads=2, head_dim=64,
                  rope_base=10000.0, eps=1e-5, vocab=301, context=64)
# name -> (ggml type, numpy shape) of one layer, as llama.cpp's Q4_K_M picks them
LAYER = {"attn_norm.weight": ("F32", (256,)), "attn_q.weight": ("Q4_K", (256, 256)),
         "attn_k.weight": ("Q4_K", (128, 256)), "attn_v.weight": ("Q6_K", (128, 256)),
         "attn_output.weight": ("Q4_K", (256, 256)), "ffn_norm.weight": ("F32", (256,)),
         "ffn_gate.weight": ("Q4_K", (512, 256)), "ffn_up.weight": ("Q4_K", (512, 256)),
         "ffn_down.weight": ("Q6_K", (256, 512))}
TOP = {"token_embd.weight": ("Q5_0", (301, 256)), "output_norm.weight": ("F32", (256,)),
       "output.weight": ("Q6_K", (301, 256))}


def mixed_file() -> tuple[dict[str, TensorInfo], dict[str, np.ndarray]]:
    """Tensor infos and bytes of a random 2-layer model in the mix above."""
    types = dict(TOP) | {f"blk.{i}.{n}": t for i in range(CFG.layers) for n, t in LAYER.items()}
    infos, data = {}, {}
    for seed, (name, (kind, shape)) in enumerate(sorted(types.items())):
        if kind == "F32":
            raw = (1.0 + 0.1 * np.random.default_rng(seed).standard_normal(shape)
                   ).astype(np.float32).view(np.uint8).reshape(-1)
        else:
            raw = quant.random_blocks(kind.lower(), *shape, seed=seed, scale=2e-3)
        infos[name] = TensorInfo(name, shape, kind, 0, raw.nbytes)
        data[name] = raw
    return infos, data


def test_q4_k_m_mix_runs_as_stored(backend, monkeypatch):
    from webrlx.backends.reference import ReferenceDevice
    from webrlx.runtime import autotune
    monkeypatch.setattr(autotune, "TIME_VARIANTS", False)        # the defaults run
    infos, data = mixed_file()
    g, outputs = build_llama(CFG, infos, capacity=32)
    params = weight_arrays(infos, lambda name: data[name].tobytes(), list(g.params))
    stored = sum(i.nbytes for i in infos.values())
    assert sum(a.nbytes for a in params.values()) <= 1.1 * stored       # no float copies
    formats = {n.attrs["format"] for n in g.nodes if n.op in ("qmatmul", "qgather")}
    assert formats == {"q4_k", "q6_k", "q5_0"}
    feeds = {"ids": np.array([[1, 300, 7, 42, 5]], np.int32), "pos": np.array([0], np.int32),
             "last": np.array([4], np.int32),
             "fparams": np.array([0.0, 1.0, 1.0, 0.0], np.float32),
             "iparams": np.array([0, 0], np.int32)}
    got, want = (wr.compile(g, outputs=outputs, device=d) for d in (backend, ReferenceDevice()))
    for exe in (got, want):
        exe.set_params(params)
    logits, ref = got.run(feeds)[2], want.run(feeds)[2]
    assert logits.shape == (1, CFG.vocab) and np.isfinite(ref).all() and np.ptp(ref) > 0
    np.testing.assert_allclose(logits, ref, rtol=0, atol=1e-4 * np.abs(ref).max())
