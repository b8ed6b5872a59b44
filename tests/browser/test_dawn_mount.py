"""`python -m webrlx dawn --mount HOST_DIR[:INSIDE]`: a host folder readable inside Pyodide
(how bench/device_dawn.sh hands a GGUF made on the GPU machine to a probe under Dawn), and a
clear error naming the argument for a folder that does not exist; the command's stdout kept
apart from the Node process's own."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def dawn(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "webrlx", "dawn", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=600, check=False)


def test_mounted_folder_is_read_inside(tmp_path):
    (tmp_path / "model.bin").write_bytes(b"gguf-bytes\x00\x01")
    code = "print(open('/mnt/models/model.bin', 'rb').read().hex())"
    proc = dawn("--mount", f"{tmp_path}:/mnt/models", "--", "python", "-c", code)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert b"gguf-bytes\x00\x01".hex() in proc.stdout


def test_missing_mount_names_the_argument(tmp_path):
    proc = dawn("--mount", str(tmp_path / "absent"), "--", "python", "-c", "pass")
    assert proc.returncode == 2
    assert "--mount" in proc.stderr and "is not a folder" in proc.stderr


def test_the_commands_stdout_is_its_own():
    """What the Node process itself writes on stdout (Dawn's shader compilation warnings, on
    the GPU machine) goes to stderr; a command's stdout holds only its own output (bench JSON)."""
    code = "import js; js.process.stdout.write('node log\\n'); print('{\"mine\": 1}')"
    proc = dawn("--", "python", "-c", code)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout == '{"mine": 1}\n'
    assert "node log" in proc.stderr
