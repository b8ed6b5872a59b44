"""`python -m webrlx gguf info FILE`: a GGUF file's metadata, tensor types and whether
webrlx runs it (and if not, why); `describe` and `over_limits` are what web/chat.html shows
and checks from a file's header before it downloads or uploads the weights."""
from __future__ import annotations

import argparse
import sys
from collections import Counter
from typing import Any, TextIO

LONG_VALUES = 8          # arrays longer than this print as their length and first items


def _value(v: Any) -> str:
    if isinstance(v, list) and len(v) > LONG_VALUES:
        return f"[{len(v)} items: {', '.join(map(repr, v[:3]))}, ...]"
    text = repr(v)
    return text if len(text) <= 200 else text[:197] + "..."


def runs(file: Any) -> tuple[bool, str]:
    """(whether webrlx.models.llm runs the file, why not / what it builds)."""
    from .. import quant
    from ..models import llama, llm
    try:                        # the header alone: no tensor data is read
        cfg = llama.LlamaConfig.from_metadata(file.metadata, str(file.path))
        llama.check_rope_tensors(cfg, file.tensors, str(file.path))
        llm.make_tokenizer(file.metadata)
    except (ValueError, NotImplementedError) as e:
        return False, str(e)
    readable = set(llama.FLOAT_TYPES) | {f.upper() for f in quant.FORMATS}
    bad = [f"{n} ({i.type})" for n, i in file.tensors.items() if i.type not in readable]
    if bad:
        return False, (f"tensor types webrlx does not read: {', '.join(bad[:5])}"
                       f"{', ...' if len(bad) > 5 else ''}")
    if cfg.head_dim % 4 or cfg.head_dim > 256:      # lower_attention / lower_decoder's limit
        return False, f"head dim {cfg.head_dim}: the attention kernels take multiples of 4 <= 256"
    return True, (f"{cfg.arch}: {cfg.layers} layers, width {cfg.width}, {cfg.heads}/"
                  f"{cfg.kv_heads} heads of {cfg.head_dim}, vocab {cfg.vocab}, context "
                  f"{cfg.context}" + (f", sliding window {cfg.window}" if cfg.window else "")
                  + (f", LongRoPE (long factors past {cfg.rope_original_context or cfg.context}"
                     " positions of KV cache)" if llama.ROPE_LONG in file.tensors else ""))


def device_bytes(tensor: Any) -> int:
    """Bytes a weight takes on the device: blocks (quant types; 2-D F16 / BF16 of rows of
    k % 32 == 0) and types webrlx does not read as stored, the other floats as float32."""
    from ..models import llama
    if tensor.type in llama.FLOAT_TYPES:
        return llama.device_bytes(tensor)
    return int(tensor.nbytes)


LIMITS = ("max-buffer-size", "max-storage-buffer-binding-size")


def describe(file: Any) -> dict[str, Any]:
    """What a page shows before loading a GGUF (from its header): name, family, parameters,
    weight types by bytes, context, whether webrlx runs it, its largest weight, and the
    limits it needs: for each of maxBufferSize (each param is one device buffer) and
    maxStorageBufferBindingSize (what one kernel binds at once), the least that every weight
    fits (llama.least_limits: the loader cuts a big vocabulary's blocks into row pieces and
    kernels bind windows of float tables), with the weight that needs the most."""
    from ..models import llama
    sizes: Counter[str] = Counter()
    for t in file.tensors.values():
        sizes[t.type] += t.nbytes
    ok, why = runs(file)
    largest = max(file.tensors.values(), key=device_bytes, default=None)
    needs = {name: 0 for name in LIMITS}
    need_by: dict[str, Any] = {}
    for t in file.tensors.values():
        for name, need in zip(LIMITS, llama.least_limits(t)):
            if need > needs[name]:
                needs[name], need_by[name] = need, _weight(t, need)
    return {"name": str(file.get("general.name", "")), "family": file.arch,
            "parameters": sum(t.n_elements for t in file.tensors.values()),
            "types": [kind for kind, _ in sizes.most_common()],
            "context": file.arch_get("context_length"), "runs": ok, "why": why,
            "largest": None if largest is None else _weight(largest, device_bytes(largest)),
            "needs": needs, "needed_by": need_by}


def _weight(t: Any, nbytes: int) -> dict[str, Any]:
    return {"name": t.name, "type": t.type, "shape": list(t.shape), "bytes": nbytes}


def over_limits(description: dict[str, Any], limits: dict[str, int], adapter: str) -> str:
    """The message for a file with a weight over an adapter's limits ("" if it fits).

    `limits` are the adapter's (dashed names, as DeviceInfo.limits): the most a device of it
    may be given, so a file over them cannot run there whatever is requested."""
    over = [name for name, need in description["needs"].items()
            if name in limits and need > limits[name]]
    if not over:
        return ""
    by = description["needed_by"][over[0]]
    return (f"this model is too big for this GPU: its weight {by['name']!r} "
            f"({by['type']} {by['shape']}) needs a buffer of {by['bytes']:,} bytes, and "
            f"{adapter} allows at most "
            f"{' and '.join(f'{n} {limits[n]:,}' for n in over)} bytes. Pick a smaller model "
            f"or a smaller quant type (e.g. Q4_K_M instead of F16), or another GPU/browser.")


def info(path: str, out: TextIO = sys.stdout) -> int:
    """Print the report of one file; 0 if webrlx runs it, 1 if not."""
    from ..models import gguf
    file = gguf.load(path)
    print(f"{path}: GGUF v{file.version}, {len(file.metadata)} metadata keys, "
          f"{len(file.tensors)} tensors", file=out)
    print("metadata:", file=out)
    for key, value in file.metadata.items():
        print(f"  {key} ({file.metadata_types[key]}): {_value(value)}", file=out)
    counts = Counter(i.type for i in file.tensors.values())
    sizes: Counter[str] = Counter()
    for i in file.tensors.values():
        sizes[i.type] += i.nbytes
    print("tensor types:", file=out)
    for kind, n in counts.most_common():
        print(f"  {kind:6s} {n:5d} tensors  {sizes[kind] / 2**20:9.2f} MiB", file=out)
    params = sum(i.n_elements for i in file.tensors.values())
    print(f"parameters: {params:,}", file=out)
    d = describe(file)
    print("device limits it needs: " + ", ".join(
        f"{name} {d['needs'][name]:,} bytes ({d['needed_by'][name]['name']})"
        for name in LIMITS if name in d["needed_by"]), file=out)
    ok, why = d["runs"], d["why"]
    print(f"webrlx runs it: {'yes' if ok else 'no'} ({why})", file=out)
    return 0 if ok else 1


def main_gguf(argv: list[str], out: TextIO = sys.stdout) -> int:
    """CLI: `gguf info FILE`."""
    p = argparse.ArgumentParser(prog="python -m webrlx gguf", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)
    q = sub.add_parser("info", help="metadata, tensor types, whether webrlx runs it")
    q.add_argument("file")
    args = p.parse_args(argv)
    return info(args.file, out)
