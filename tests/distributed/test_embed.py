"""webrlx.distributed.embed on a local Ray (2 CPUs, lavapipe): 2 actors give the embeddings of a
single-process encode, every id exactly once; an actor killed mid-job (SIGKILL) is restarted
and its batches retried; bad rows get the error column, or fail the job under strict=True.
The default run embeds a small corpus (the box's budget); WEBRLX_RAY_FULL=1 embeds 2,000."""
from __future__ import annotations

import os
import random
import signal

import numpy as np
import pytest

ray = pytest.importorskip("ray")
wd = pytest.importorskip("webrlx.distributed")

FULL = os.environ.get("WEBRLX_RAY_FULL") == "1"
N = 2000 if FULL else 24
WORDS = ("river mountain quantum bread violin engine election galaxy spoon theorem harbor "
         "protein lantern glacier algorithm orchestra pepper satellite novel tide").split()


def sentences(n: int, seed: int = 0) -> list[str]:
    """Varied sentences: lengths 1-60 words, punctuation, digits, case, accents."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        words = [rng.choice(WORDS) for _ in range(rng.choice((1, 3, 8, 15, 30, 60)))]
        if i % 3 == 0:
            words[0] = words[0].capitalize()
        if i % 5 == 0:
            words.append(f"{rng.randint(0, 10**6)}")
        if i % 7 == 0:
            words.insert(1, "café, naïve!")
        out.append(" ".join(words) + rng.choice((".", "?", "", " ...")))
    return out


@pytest.fixture(scope="module")
def local_ray():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    ray.data.DataContext.get_current().enable_progress_bars = False
    yield ray
    ray.shutdown()


@pytest.fixture(scope="module")
def encoder():
    from webrlx.models import minilm
    return minilm.load()


def dataset(texts: list[str], ids: list[int]):
    return ray.data.from_items([{"id": i, "text": t} for i, t in zip(ids, texts)],
                               override_num_blocks=4)


def check_rows(rows, texts, ids, encoder):
    got_ids = [int(r["id"]) for r in rows]
    assert sorted(got_ids) == sorted(ids), "a row lost or duplicated"
    by_id = {int(r["id"]): r for r in rows}
    want = encoder.encode(texts)
    got = np.stack([np.asarray(by_id[i]["embedding"], np.float32) for i in ids])
    assert all(by_id[i]["error"] is None for i in ids)
    assert all(by_id[i]["text"] == t for i, t in zip(ids, texts))
    cos = np.sum(got * want, axis=1) / np.linalg.norm(got, axis=1) / np.linalg.norm(want, axis=1)
    assert cos.min() >= 0.99999, (cos.argmin(), cos.min())


def test_two_actors_equal_single_process_encode(local_ray, encoder):
    texts = sentences(N)
    ids = list(range(1000, 1000 + N))
    rng = random.Random(1)
    rng.shuffle(ids)                                     # ids are carried, not positions
    out = wd.embed(dataset(texts, ids), batch_size=8, concurrency=2, num_cpus=0.5)
    check_rows(out.take_all(), texts, ids, encoder)


def _pool_actors() -> dict[str, dict]:
    from ray._private import state
    return {a["ActorID"]: a for a in state.actors().values()
            if "Embedder" in a["ActorClassName"]}


def test_actor_killed_mid_job_restarts_and_no_row_is_lost(local_ray, encoder):
    texts = sentences(N, seed=2)
    ids = list(range(N))
    ds = wd.embed(dataset(texts, ids), batch_size=4, concurrency=2, num_cpus=0.5)
    rows, killed = [], None
    for batch in ds.iter_rows():
        rows.append(batch)
        if killed is None:                               # the first row is out: mid-job
            alive = [a for a in _pool_actors().values() if a["State"] == "ALIVE"]
            killed = alive[0]
            os.kill(killed["Pid"], signal.SIGKILL)
    assert len(rows) == N
    check_rows(rows, texts, ids, encoder)
    after = _pool_actors()[killed["ActorID"]]
    assert after["NumRestarts"] >= 1, after


def test_bad_rows_get_the_error_column_and_ids_are_added(local_ray):
    texts = ["a fine sentence.", "", None, "   ", "word " * 400, "another one."]
    rows = wd.embed(ray.data.from_items([{"text": t} for t in texts]), batch_size=3,
                    concurrency=1, num_cpus=0.5).take_all()
    assert len({int(r["id"]) for r in rows}) == 6                # added: unique
    by_text = {r["text"]: r for r in rows}
    assert len(by_text) == 6
    errors = [by_text[t]["error"] for t in texts]
    assert errors[0] is None and errors[5] is None
    assert errors[1] == "empty text" and errors[3] == "empty text"
    assert errors[2].startswith("not text")
    assert errors[4].startswith("over the context")
    for t in texts[1:5]:
        assert np.isnan(by_text[t]["embedding"]).all()
    assert np.isfinite(by_text[texts[0]]["embedding"]).all()


def test_strict_fails_naming_the_row(local_ray):
    rows = [{"id": 70 + i, "text": t} for i, t in enumerate(["fine.", "", "fine too."])]
    with pytest.raises(Exception, match="row id 71: empty text"):
        wd.embed(ray.data.from_items(rows), batch_size=3, concurrency=1, num_cpus=0.5,
                 strict=True).take_all()


def test_import_webrlx_does_not_import_ray():
    import subprocess
    import sys
    code = "import sys, webrlx, webrlx.models.minilm; print('ray' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "False"


def test_bad_arguments_are_refused_before_ray_runs(local_ray):
    ds = ray.data.from_items([{"text": "x"}])
    with pytest.raises(ValueError, match="concurrency must be an int >= 1"):
        wd.embed(ds, concurrency=0)
    with pytest.raises(ValueError, match="batch_size must be an int >= 1"):
        wd.embed(ds, batch_size=-1)
