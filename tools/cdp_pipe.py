"""Drive a headless Chromium through the DevTools protocol over pipes (`--remote-debugging-pipe`:
requests on fd 3, replies on fd 4, JSON messages ended by a NUL byte), with nothing but the
standard library: for machines without playwright and its driver (the lent GPU machine, where
issue 32 runs Chromium itself on the GPU). One page, one expression awaited:

    python tools/cdp_pipe.py --chromium PATH --url http://localhost:8000/ \\
        --eval "(async () => JSON.stringify(...))()" [--timeout 600] [-- extra flags]

Prints the expression's value (a string) on stdout; the browser's console and exceptions go
to stderr. Exits 1 with the reason when the page throws or time runs out.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from typing import Any

FLAGS = ["--headless=new", "--no-sandbox", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--disable-quic",
         "--remote-debugging-pipe"]


class Pipe:
    """The DevTools connection: send a method, wait for its reply (events go to on_event)."""

    def __init__(self, proc: subprocess.Popen, to_browser: int, from_browser: int) -> None:
        self.proc, self.out, self.inp = proc, to_browser, from_browser
        self.next_id, self.buf = 0, b""

    def send(self, method: str, params: dict[str, Any] | None = None,
             session: str | None = None, timeout: float = 60.0) -> dict[str, Any]:
        self.next_id += 1
        msg: dict[str, Any] = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self.out, json.dumps(msg).encode() + b"\0")
        end = time.monotonic() + timeout
        while True:
            reply = self._read(end)
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.on_event(reply)

    def on_event(self, event: dict[str, Any]) -> None:
        p = event.get("params", {})
        if event.get("method") == "Runtime.consoleAPICalled":
            text = " ".join(str(a.get("value", a.get("description", ""))) for a in p["args"])
            print(f"console.{p.get('type')}: {text}", file=sys.stderr)
        elif event.get("method") == "Runtime.exceptionThrown":
            print(f"exception: {p['exceptionDetails']}", file=sys.stderr)

    def _read(self, end: float) -> dict[str, Any]:
        while b"\0" not in self.buf:
            if time.monotonic() > end:
                raise TimeoutError("no reply from the browser in time")
            if self.proc.poll() is not None:
                raise RuntimeError(f"the browser exited with status {self.proc.returncode}")
            chunk = os.read(self.inp, 1 << 20)
            if not chunk:
                raise RuntimeError("the browser closed its pipe")
            self.buf += chunk
        raw, self.buf = self.buf.split(b"\0", 1)
        return json.loads(raw)


def run(chromium: str, url: str, expression: str, flags: list[str], timeout: float) -> str:
    """Open url in a fresh profile, await expression there, return its string value."""
    r1, w1 = os.pipe()          # to the browser: its fd 3
    r2, w2 = os.pipe()          # from the browser: its fd 4

    def child_fds() -> None:     # runs before the child closes the fds it does not keep
        os.dup2(r1, 3)
        os.dup2(w2, 4)
    with tempfile.TemporaryDirectory(prefix="cdp-profile-", ignore_cleanup_errors=True) as profile:
        proc = subprocess.Popen([chromium, *FLAGS, f"--user-data-dir={profile}", *flags,
                                 "about:blank"], pass_fds=(3, 4), preexec_fn=child_fds,
                                stdout=sys.stderr, stderr=sys.stderr)
        os.close(r1)
        os.close(w2)
        pipe = Pipe(proc, w1, r2)
        try:
            target = pipe.send("Target.createTarget", {"url": "about:blank"})["targetId"]
            session = pipe.send("Target.attachToTarget", {"targetId": target,
                                                          "flatten": True})["sessionId"]
            pipe.send("Runtime.enable", session=session)
            pipe.send("Page.enable", session=session)
            pipe.send("Page.navigate", {"url": url}, session=session)
            time.sleep(1.0)                           # the page's first scripts
            result = pipe.send("Runtime.evaluate", {
                "expression": expression, "awaitPromise": True, "returnByValue": True},
                session=session, timeout=timeout)
            if "exceptionDetails" in result:
                raise RuntimeError(f"the page threw: {result['exceptionDetails']}")
            return str(result["result"].get("value"))
        finally:
            try:
                pipe.send("Browser.close", timeout=10)
            except Exception:   # noqa: BLE001 - closing is best effort; the process is killed
                pass
            proc.kill()
            proc.wait()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--chromium", default="/usr/lib/chromium/chromium",
                    help="the browser binary (not Debian's /usr/bin wrapper script)")
    ap.add_argument("--url", required=True)
    ap.add_argument("--eval", required=True, help="a JS expression (a promise is awaited)")
    ap.add_argument("--timeout", type=float, default=600.0)
    ap.add_argument("flags", nargs="*", help="more Chromium flags (after --)")
    a = ap.parse_args()
    try:
        print(run(a.chromium, a.url, a.eval, a.flags, a.timeout))
    except (RuntimeError, TimeoutError) as e:
        sys.exit(f"cdp_pipe: {e}")


if __name__ == "__main__":
    main()
