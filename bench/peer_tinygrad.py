"""tinygrad's WEBGPU backend (Dawn) timing square f32 matmuls, as its users call it:
(a @ b).realize() then a device synchronize; median of batches. Prints JSON rows.
Run with DEV=WEBGPU WEBGPU_PATH=<pydawn>/lib/libwebgpu_dawn_x86_64.so (bench.py passes env).
usage: peer_tinygrad.py SIZES ITERS REPEATS"""
import json
import statistics
import sys
import time

from tinygrad import Device, Tensor


def main() -> None:
    sizes = [int(s) for s in sys.argv[1].split(",")]
    iters, repeats = int(sys.argv[2]), int(sys.argv[3])
    dev = Device[Device.DEFAULT]
    rows = []
    for n in sizes:
        a = Tensor.randn(n, n).realize()
        b = Tensor.randn(n, n).realize()
        (a @ b).realize()
        dev.synchronize()
        samples = []
        for _ in range(repeats):
            t = time.perf_counter()
            for _ in range(iters):
                (a @ b).realize()
            dev.synchronize()
            samples.append((time.perf_counter() - t) / iters)
        ms = statistics.median(samples) * 1e3
        rows.append({"peer": f"tinygrad {Device.DEFAULT}", "n": n, "ms": ms,
                     "gflops": 2.0 * n ** 3 / (ms / 1e3) / 1e9})
    print(json.dumps(rows))


if __name__ == "__main__":
    main()
