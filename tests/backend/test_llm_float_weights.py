"""F16 and BF16 GGUF weights stay as stored on the device (quant.FORMATS rows f16 / bf16,
dequantized inside the kernels): a small random Llama and a Phi-3 (fused qkv and gate/up,
loaded as row slices) written by the `gguf` package load through llm.load, their params take
<= 1.1x the file's tensor bytes (F32 would take 2x), and their logits equal those of the same
weights widened to F32 in a second file (the float path, held to transformers by
test_llm_families.py) within 1e-3 x max|logit|. Unsupported tensor types raise naming the
tensor; F16 rows of k % 32 != 0 fall back to float32. Needs the gguf package (skipped without
it, e.g. in Pyodide)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from webrlx.models import llama, llm
from webrlx.models.gguf import TensorInfo

WIDTH, FFN, HEADS, KV, HD, VOCAB, LAYERS = 64, 128, 4, 2, 16, 288, 2
PROMPT = [1, 40, 200, 7, 99, 250, 3]


def _tensors(arch: str, seed: int) -> dict[str, np.ndarray]:
    """GGUF name -> float32 array (numpy shape (n, k)) of a random model."""
    rng = np.random.default_rng(seed)

    def w(*shape: int) -> np.ndarray:
        return (rng.standard_normal(shape) / np.sqrt(shape[-1])).astype(np.float32)

    t = {"token_embd.weight": w(VOCAB, WIDTH), "output.weight": w(VOCAB, WIDTH),
         "output_norm.weight": (1 + 0.1 * rng.standard_normal(WIDTH)).astype(np.float32)}
    for i in range(LAYERS):
        p = f"blk.{i}."
        t[p + "attn_norm.weight"] = (1 + 0.1 * rng.standard_normal(WIDTH)).astype(np.float32)
        t[p + "ffn_norm.weight"] = (1 + 0.1 * rng.standard_normal(WIDTH)).astype(np.float32)
        if arch == "phi3":                               # [q; k; v] and [gate; up]
            t[p + "attn_qkv.weight"] = w((HEADS + 2 * KV) * HD, WIDTH)
            t[p + "ffn_up.weight"] = w(2 * FFN, WIDTH)
        else:
            t[p + "attn_q.weight"] = w(HEADS * HD, WIDTH)
            t[p + "attn_k.weight"] = w(KV * HD, WIDTH)
            t[p + "attn_v.weight"] = w(KV * HD, WIDTH)
            t[p + "ffn_gate.weight"] = w(FFN, WIDTH)
            t[p + "ffn_up.weight"] = w(FFN, WIDTH)
        t[p + "attn_output.weight"] = w(WIDTH, HEADS * HD)
        t[p + "ffn_down.weight"] = w(WIDTH, FFN)
    return t


def write(path: Path, arch: str, qtype: str, tensors: dict[str, np.ndarray]) -> Path:
    """A GGUF of `arch` with a byte-level BPE vocabulary; 2-D tensors in qtype (F16, BF16:
    the gguf package's conversion), 1-D ones F32."""
    gguf = pytest.importorskip("gguf")
    from webrlx.models.bpe import bytes_to_unicode
    w = gguf.GGUFWriter(str(path), arch)
    w.add_context_length(64)
    w.add_embedding_length(WIDTH)
    w.add_block_count(LAYERS)
    w.add_feed_forward_length(FFN)
    w.add_head_count(HEADS)
    w.add_head_count_kv(KV)
    w.add_rope_dimension_count(HD)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_vocab_size(VOCAB)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("gpt2")
    b2u = bytes_to_unicode()
    chars = [b2u[b] for b in range(256)] + ["Hi"]
    w.add_token_list(chars + [f"<x{i}>" for i in range(VOCAB - len(chars))])
    w.add_token_merges(["H i"])
    w.add_bos_token_id(VOCAB - 2)
    w.add_eos_token_id(VOCAB - 1)
    qt = gguf.GGMLQuantizationType[qtype]
    for name, arr in tensors.items():
        if arr.ndim == 2 and qtype != "F32":
            w.add_tensor(name, gguf.quants.quantize(arr, qt), raw_dtype=qt)
        else:
            w.add_tensor(name, arr)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def param_bytes(lm: llm.LanguageModel) -> int:
    """Bytes the params take on the device (the reference engine: its arrays)."""
    eng = lm.executable.engine
    if hasattr(eng, "param_bufs"):
        return sum(int(b.size) for b in eng.param_bufs.values())
    return sum(int(a.nbytes) for a in eng.params.values())


@pytest.mark.parametrize("arch", ["llama", "phi3"])
@pytest.mark.parametrize("qtype", ["F16", "BF16"])
def test_float_weights_run_as_stored(backend, tmp_path, arch, qtype, monkeypatch):
    from webrlx.runtime import autotune
    gguf = pytest.importorskip("gguf")
    monkeypatch.setattr(autotune, "TIME_VARIANTS", False)        # the defaults run
    tensors = _tensors(arch, seed=len(arch))
    path = write(tmp_path / f"m-{qtype}.gguf", arch, qtype, tensors)
    qt = gguf.GGMLQuantizationType[qtype]
    widened = {n: gguf.quants.dequantize(gguf.quants.quantize(a, qt), qt) if a.ndim == 2
               else a for n, a in tensors.items()}                  # the same values, F32
    ref = write(tmp_path / "m-f32.gguf", arch, "F32", widened)
    lm, lm32 = (llm.load(p, device=backend, max_context=32) for p in (path, ref))
    fmt = qtype.lower()
    formats = {n.attrs["format"] for n in lm.graph.nodes if n.op in ("qmatmul", "qgather")}
    assert formats == {fmt}
    assert not any(n.op in ("qmatmul", "qgather") for n in lm32.graph.nodes)
    stored = sum(i.nbytes for i in lm.tensor_infos.values())
    assert param_bytes(lm) <= 1.1 * stored
    assert param_bytes(lm32) >= 1.9 * stored                    # the float path: 2x
    logits = []
    for m in (lm, lm32):
        m.generate_ids(PROMPT, 1)
        logits.append(m.last_logits.numpy().reshape(-1))
    got, want = logits
    assert np.isfinite(want).all() and np.ptp(want) > 0
    assert np.abs(got - want).max() <= 1e-3 * np.abs(want).max()
    # greedy decoding (the GEMVs of one row) agrees too
    assert lm.generate_ids(PROMPT, 8, ignore_eos=True) == lm32.generate_ids(PROMPT, 8,
                                                                             ignore_eos=True)


def test_unsupported_tensor_type_names_the_tensor(tmp_path):
    pytest.importorskip("gguf")
    tensors = _tensors("llama", seed=0)
    tensors["blk.1.ffn_down.weight"] = np.ones((WIDTH, FFN), np.int8)     # GGUF I8
    path = write(tmp_path / "i8.gguf", "llama", "F32", tensors)
    with pytest.raises(llm.UnsupportedModelError,
                       match=r"'blk\.1\.ffn_down\.weight' is I8; webrlx reads F32, F16, BF16"):
        llm.load(path, device="reference", max_context=32)


def test_float_rows_off_blocks_and_norms_become_float32():
    """F16 / BF16 weights whose rows are not whole blocks of 32, and 1-D ones (norms,
    biases), are widened to float32 params; rows of whole blocks stay as stored."""
    x = np.random.default_rng(0).standard_normal((5, 48)).astype(np.float32)
    high = (x.view(np.uint32) >> 16).astype("<u2")          # bf16: the high halves
    cases = {"F16": (x.astype("<f2"), x.astype(np.float16).astype(np.float32)),
             "BF16": (high, (high.astype(np.uint32) << 16).view(np.float32))}
    for kind, (stored, want) in cases.items():
        info = TensorInfo("w", (5, 48), kind, 0, stored.nbytes)
        norm = TensorInfo("g", (48,), kind, 0, stored[0].nbytes)
        assert llama.block_format(info) is None and llama.device_bytes(info) == 5 * 48 * 4
        got = llama.weight_arrays({"w": info, "g": norm},
                                  lambda name, s=stored: (s if name == "w" else s[0]).tobytes(),
                                  ["w^T", "g"])
        np.testing.assert_array_equal(got["w^T"], want.T)
        np.testing.assert_array_equal(got["g"], want[0])
        assert got["w^T"].dtype == got["g"].dtype == np.float32
    wide = TensorInfo("w", (5, 64), "BF16", 0, 640)
    assert llama.block_format(wide) == "bf16" and llama.device_bytes(wide) == 640
