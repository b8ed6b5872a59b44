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
    if name not in ("default", "gpu", "reference"):
        raise ValueError(f"device(): unknown device {name!r}; use 'gpu', 'reference' or None "
                         f"(also settable with WEBRLX_DEVICE)")
    return name


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
            or "reference" (the numpy oracle).
    """
    name = _wanted(name)
    if name == "reference":
        return _default.setdefault("reference", ReferenceDevice())
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


async def device_async(name: str | None = None) -> Any:
    """Async form of device(): the form that works everywhere in the browser."""
    name = _wanted(name)
    if name != "reference" and sys.platform == "emscripten" and (
            "gpu" not in _default or _default["gpu"].lost is not None):
        from .js_webgpu import create_backend_async
        _default["gpu"] = await create_backend_async()
    return device(name)
