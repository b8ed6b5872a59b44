"""DeviceInfo: what a device is and what it can do. The compiler reads limits and features from
here (never assuming them); backends fill it in from their adapter."""
from __future__ import annotations

from dataclasses import dataclass, field


def alloc_bytes(nbytes: int) -> int:
    """Bytes a backend allocates for an nbytes buffer: a multiple of 16, at least 16, so that
    a window that starts at an aligned offset inside it can always bind 16 bytes
    (compiler/split.py)."""
    return max(16, -(-nbytes // 16) * 16)


@dataclass
class DeviceInfo:
    """An adapter's name, backend, limits (WebGPU names, dashed) and optional features."""
    name: str                      # adapter name, e.g. "llvmpipe (LLVM 15.0.6, 256 bits)"
    backend: str                   # "wgpu (Vulkan)", "navigator.gpu", "reference"
    limits: dict[str, int] = field(default_factory=dict)
    features: frozenset[str] = frozenset()   # "shader-f16", "subgroups", "timestamp-query"
    driver: str = ""               # driver description where the adapter tells it (natively)
    # threads of a subgroup where Backend.probe_subgroups checked that a 1-D workgroup is cut
    # into runs of this many consecutive local_invocation_index values; 0: no subgroups, or
    # not checked (software adapters and the browser keep workgroup-memory reductions)
    subgroup_size: int = 0
    # the adapter's (min, max) subgroup size where it tells them (the browser's
    # GPUAdapterInfo.subgroupMinSize / subgroupMaxSize; (32, 32) on NVIDIA), else (0, 0): what
    # a kernel that needs one size may check (attention_smat), the layout unchecked
    subgroup_sizes: tuple[int, int] = (0, 0)
    # the adapter's subgroup-matrix configurations (Dawn's chromium-experimental-subgroup-matrix:
    # adapter.info.subgroupMatrixConfigs) as (component, result, M, N, K), e.g.
    # ("f16", "f32", 16, 16, 16); empty elsewhere
    subgroup_matrix_configs: tuple[tuple[str, str, int, int, int], ...] = ()

    @property
    def tune_name(self) -> str:
        """The autotuner's key for this adapter: its name and driver, so that a new driver
        is timed afresh ("NVIDIA H100 80GB HBM3 | 580.65.06")."""
        return f"{self.name} | {self.driver}" if self.driver else self.name

    def limit(self, name: str, default: int = 0) -> int:
        """Return limit `name` (dashed WebGPU spelling), or default when the device has none."""
        return int(self.limits.get(name, default))

    @property
    def shared_read_bindings(self) -> bool:
        """Whether one buffer may fill several read_write bindings of a dispatch that only
        reads them (emit's read_only): wgpu-native allows it; the browser's WebGPU (Dawn)
        rejects aliased writable bindings, so there the compiler binds copies."""
        return self.backend.startswith("wgpu")

    @property
    def max_workgroup_invocations(self) -> int:
        return self.limit("max-compute-invocations-per-workgroup", 256)

    @property
    def storage_alignment(self) -> int:
        return self.limit("min-storage-buffer-offset-alignment", 256)

    @property
    def uniform_alignment(self) -> int:
        return self.limit("min-uniform-buffer-offset-alignment", 256)

    @property
    def max_buffer_size(self) -> int:
        return self.limit("max-buffer-size", 1 << 28)

    @property
    def max_binding_size(self) -> int:
        return min(self.limit("max-storage-buffer-binding-size", 1 << 27), self.max_buffer_size)

    @property
    def software(self) -> bool:
        """A CPU adapter (lavapipe/llvmpipe, SwiftShader): a few cores, where each workgroup
        costs a scheduling step even when it returns at once."""
        name = self.name.lower()
        return any(k in name for k in ("llvmpipe", "lavapipe", "swiftshader"))

    @property
    def loop_cap(self) -> int | None:
        """Iterations after which the driver silently ends a shader's loop nest, if it does:
        llvmpipe (lavapipe) stops at 65,535."""
        return 65535 if "llvmpipe" in self.name.lower() else None

    @property
    def has_f16(self) -> bool:
        return "shader-f16" in self.features

    @property
    def subgroup_matrix_f16(self) -> bool:
        """Whether tensor-core f16 matmuls (compiler/smat.py) run here: the subgroup-matrix
        feature, shader-f16, and f16 -> f32 16x16x16 matrices."""
        return ("chromium-experimental-subgroup-matrix" in self.features and self.has_f16
                and ("f16", "f32", 16, 16, 16) in self.subgroup_matrix_configs)

    @property
    def subgroup_matrix_i8(self) -> bool:
        """Whether int8 tensor-core prefills (quant/qmatmul_mmq.wgsl) can run here: the
        subgroup-matrix feature with i8 -> i32 16x16x32 matrices."""
        return ("chromium-experimental-subgroup-matrix" in self.features
                and ("i8", "i32", 16, 16, 32) in self.subgroup_matrix_configs)
