"""Pick the default device in one place: the browser's navigator.gpu under Pyodide, wgpu-py
natively, and the numpy reference (with a warning) where no adapter exists."""
from __future__ import annotations

import os
import sys
import warnings
from typing import Any

from .reference import ReferenceDevice

_default: dict[str, Any] = {}


def _wanted(name: str | None) -> str:
    name = name or os.environ.get("WEBRLX_DEVICE") or "default"
    if name not in ("default", "gpu", "reference") and not (
            name.startswith("gpu:") and name[4:].isdigit()):
        raise ValueError(f"device(): unknown device {name!r}; use 'gpu', 'gpu:N' (the N-th "
                         f"adapter), 'reference' or None (also settable with WEBRLX_DEVICE)")
    return name


def _indexed_gpu(name: str) -> Any:
    """device("gpu:N"): the N-th adapter of the default one's backend and type (natively)."""
    if sys.platform == "emscripten":
        raise ValueError(f"device({name!r}): the browser offers one adapter; use 'gpu'")
    dev = _default.get(name)
    if dev is not None and dev.lost is None:
        return dev
    from .wgpu_native import WgpuBackend, gpu_adapters
    adapters = gpu_adapters()
    index = int(name[4:])
    if index >= len(adapters):
        names = [a.info.get("device", "?") for a in adapters]
        raise RuntimeError(f"device({name!r}): there are {len(adapters)} adapters of the "
                           f"default adapter's kind ({names}); use gpu:0 .. "
                           f"gpu:{len(adapters) - 1}")
    dev = _default[name] = WgpuBackend(adapters[index])
    return dev


def _native_gpu() -> Any:
    from .wgpu_native import WgpuBackend, request_adapter
    try:
        adapter = request_adapter()
    except Exception as e:  # noqa: BLE001 - any failure to reach a driver means "no adapter"
        adapter, why = None, f"{type(e).__name__}: {e}"
    else:
        why = "wgpu found no adapter"
    if adapter is None:
        return None, why
    return WgpuBackend(adapter), ""


def device(name: str | None = None) -> Any:
    """Return the default device (cached): a GPU backend, or the numpy reference.

    Args:
        name: None (default adapter; WEBRLX_DEVICE overrides), "gpu" (fail without one),
            "gpu:N" (the N-th adapter of the default one's backend and type, in the driver's
            order: one GPU of several, as Ray's GPU ids number them), or "reference" (the
            numpy oracle).
    """
    name = _wanted(name)
    if name == "reference":
        return _default.setdefault("reference", ReferenceDevice())
    if name.startswith("gpu:"):
        return _indexed_gpu(name)
    if "gpu" in _default and _default["gpu"].lost is None:
        return _default["gpu"]                     # (a lost device is replaced by a fresh one)
    if sys.platform == "emscripten":
        from .js_webgpu import create_backend
        gpu, why = create_backend(), ""
    else:
        gpu, why = _native_gpu()
    if gpu is None:
        if name == "gpu":
            raise RuntimeError(f"device('gpu'): no WebGPU adapter ({why}). Install a driver "
                               f"(e.g. apt-get install mesa-vulkan-drivers) or use 'reference'")
        warnings.warn(f"webrlx: no WebGPU adapter ({why}); falling back to the numpy reference "
                      f"device (slow). Install mesa-vulkan-drivers or a GPU driver.",
                      RuntimeWarning, stacklevel=2)
        return device("reference")
    _default["gpu"] = gpu
    return gpu


def acquired() -> Any:
    """The default GPU device if one was acquired already (and is not lost), else None."""
    gpu = _default.get("gpu")
    return gpu if gpu is not None and gpu.lost is None else None


async def device_async(name: str | None = None) -> Any:
    """Async form of device(): the form that works everywhere in the browser."""
    name = _wanted(name)
    if name != "reference" and sys.platform == "emscripten" and (
            "gpu" not in _default or _default["gpu"].lost is not None):
        from .js_webgpu import create_backend_async
        _default["gpu"] = await create_backend_async()
    return device(name)
