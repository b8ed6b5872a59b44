"""Per-actor GPU pinning: device("gpu:N") picks the N-th adapter of the default one's kind (and
names the count when there is no such adapter); gpu_for maps Ray's GPU ids to adapters (by
index where the driver lists every GPU, gpu:0 where it lists only the visible one); and on a
local Ray that declares 2 GPUs, two actors with num_gpus=1 get different GPU ids, each with its
CUDA_VISIBLE_DEVICES, and resolve their device from them."""
from __future__ import annotations

import pytest

import webrlx as wr
from webrlx.backends import auto
from webrlx.backends.wgpu_native import gpu_adapters

ray = pytest.importorskip("ray")
from webrlx.distributed import actor_device, gpu_for  # noqa: E402


def test_indexed_adapter_and_its_errors():
    adapters = gpu_adapters()
    assert adapters, "no wgpu adapter: tools/setup.sh installs Mesa's lavapipe"
    dev = wr.device("gpu:0")
    assert dev.info.name == adapters[0].info["device"]
    assert wr.device("gpu:0") is dev                    # cached, like device()
    with pytest.raises(RuntimeError, match=rf"there are {len(adapters)} adapters.*gpu:0"):
        wr.device(f"gpu:{len(adapters)}")
    with pytest.raises(ValueError, match="'gpu:N'"):
        wr.device("gpu:x")
    assert auto.device("reference").info.name != dev.info.name


def test_gpu_ids_to_adapters():
    assert [gpu_for([i], 2) for i in (0, 1)] == ["gpu:0", "gpu:1"]    # every GPU listed
    assert gpu_for(["1"], 8) == "gpu:1"
    assert gpu_for([1], 1) == "gpu:0"             # the driver lists only the visible GPU
    with pytest.raises(RuntimeError, match="lists 2 adapters"):
        gpu_for([3], 2)
    with pytest.raises(RuntimeError, match="not an index"):
        gpu_for(["GPU-5f3e"], 2)


def test_outside_ray_and_explicit_devices_pass_through():
    assert actor_device("reference") == "reference"
    assert actor_device("gpu:3") == "gpu:3"
    if not ray.is_initialized():
        assert actor_device(None) is None


def test_two_actors_get_the_gpus_ray_assigned(monkeypatch):
    monkeypatch.setenv("RAY_agent_register_timeout_ms", "120000")   # a busy box: wait
    ray.init(num_cpus=2, num_gpus=2, include_dashboard=False, log_to_driver=False)
    try:
        @ray.remote(num_gpus=1, num_cpus=0)
        class Probe:
            def where(self) -> tuple[str | None, list, str]:
                import os
                return (actor_device(None), ray.get_gpu_ids(),
                        os.environ.get("CUDA_VISIBLE_DEVICES", ""))

        actors = [Probe.remote() for _ in range(2)]
        got = ray.get([a.where.remote() for a in actors])
        assert sorted(str(ids[0]) for _, ids, _ in got) == ["0", "1"]
        n = len(gpu_adapters())
        for d, ids, visible in got:
            assert visible == str(ids[0]) and d == gpu_for(ids, n)

        @ray.remote(num_gpus=0, num_cpus=0)
        def cpu_task() -> str | None:
            return actor_device(None)
        assert ray.get(cpu_task.remote()) is None
    finally:
        ray.shutdown()
