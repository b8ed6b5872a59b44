"""web/chat.html: SmolLM2 chats in the browser, in a Web Worker. The load shows its phases
(download with bytes, then compile); an empty message is refused with a message; a reply
streams in (greedy: transformers says "The capital of France is Paris.") with tokens/s and
the adapter shown; New chat clears the conversation; Stop ends a long reply and the page
goes idle.

SwiftShader on a small, busy machine is slow (minutes to compile the kernels, minutes for a
prompt): replies are kept short (max_new_tokens=12, a KV cache of 256) and timeouts long."""
from __future__ import annotations

import re
import time
from typing import Any

LOAD_TIMEOUT_MS = 1_500_000
REPLY_TIMEOUT_MS = 1_200_000

# Installed before the page's own script: records each status text (phase | detail) and,
# with performance.now(), each text of the latest reply as it changes.
RECORDER = """
window.chatTest = { status: [], replies: [] };
document.addEventListener("DOMContentLoaded", () => {
  const status = document.getElementById("status");
  const log = document.getElementById("log");
  const seenStatus = () => {
    const text = document.getElementById("phase").textContent + " | " +
                 document.getElementById("detail").textContent;
    const list = window.chatTest.status;
    if (list[list.length - 1] !== text && list.length < 2000) list.push(text);
  };
  new MutationObserver(seenStatus).observe(status, { subtree: true, childList: true,
                                                     characterData: true });
  new MutationObserver(() => {
    const replies = log.querySelectorAll(".msg.assistant .text");
    const text = replies.length ? replies[replies.length - 1].textContent : "";
    const list = window.chatTest.replies;
    if (list.length === 0 || list[list.length - 1][1] !== text) {
      list.push([performance.now(), text]);
    }
  }).observe(log, { subtree: true, childList: true, characterData: true });
});
"""
STATE = "document.body.dataset.state"
IDLE = "['ready', 'failed'].includes(document.body.dataset.state)"
LAST_REPLY = """() => { const r = document.querySelectorAll('#log .msg.assistant');
  const m = r[r.length - 1]; return m ? {text: m.querySelector('.text').textContent,
  meta: m.querySelector('.meta').textContent, error: m.classList.contains('error')} : null; }"""
BUTTONS = "() => ['send', 'stop', 'new-chat'].map(id => document.getElementById(id).disabled)"


def send(page: Any, prompt: str) -> None:
    page.fill("#prompt", prompt)
    page.click("#send")
    page.wait_for_function(f"{STATE} === 'generating'", timeout=10_000)


def test_chat_page_streams_stops_and_starts_over(chromium: Any, web_server: str) -> None:
    page = chromium.new_page()
    console: list[str] = []
    page.on("console", lambda msg: console.append(msg.text))
    page.on("pageerror", lambda err: console.append(f"pageerror: {err}"))
    page.add_init_script(RECORDER)
    try:
        t0 = time.perf_counter()
        page.goto(web_server + "chat.html?capacity=256&max_new_tokens=12")
        page.wait_for_function(IDLE, timeout=LOAD_TIMEOUT_MS)
        load_s = time.perf_counter() - t0
        assert page.evaluate(STATE) == "ready", (page.inner_text("#notice"), console[-20:])
        statuses = page.evaluate("chatTest.status")
        adapter = page.inner_text("#adapter-name")

        # The load went through its phases, with bytes while downloading.
        assert any(re.search(r"Downloading the model \| [\d.]+ of [\d.]+ MB", s)
                   for s in statuses), statuses[:20]
        assert any(s.startswith("Step 5 of 5: Compiling") for s in statuses), statuses[:20]
        assert adapter.strip() and "navigator.gpu" in page.inner_text("#adapter")
        assert page.evaluate(BUTTONS) == [False, True, True]     # nothing to clear yet

        # An empty message is refused, with a message, and nothing is sent.
        page.fill("#prompt", "   ")
        page.click("#send")
        assert "Type a message first" in page.inner_text("#notice")
        assert page.evaluate(STATE) == "ready" and page.locator("#log .msg").count() == 0

        # A reply streams in, while the page stays responsive (the elapsed time ticks).
        t1 = time.perf_counter()
        send(page, "What is the capital of France?")
        assert page.evaluate(BUTTONS) == [True, False, True]
        tick = page.inner_text("#elapsed")
        page.wait_for_function(f"document.getElementById('elapsed').textContent !== '{tick}'",
                               timeout=5_000)
        page.wait_for_function(IDLE, timeout=REPLY_TIMEOUT_MS)
        reply_s = time.perf_counter() - t1
        reply = page.evaluate(LAST_REPLY)
        updates = [text for _, text in page.evaluate("chatTest.replies") if text]
        assert not reply["error"], reply
        assert "Paris" in reply["text"], reply
        assert len(updates) >= 2 and updates[-1] == reply["text"], updates   # it streamed
        assert all(b.startswith(a) for a, b in zip(updates, updates[1:])), updates
        assert re.search(r"\d+ tokens · [\d.]+ tokens/s", reply["meta"]), reply
        assert page.evaluate(BUTTONS) == [False, True, False]

        # New chat clears the conversation.
        page.click("#new-chat")
        assert page.locator("#log .msg").count() == 0

        # Stop ends a long reply: the text stops growing and the page is idle again.
        page.click("details summary")                             # Settings
        page.fill("#max-tokens", "200")
        t2 = time.perf_counter()
        send(page, "Write a long story about a brave little robot.")
        page.wait_for_function(
            "document.querySelector('#log .msg.assistant .text').textContent.length > 0",
            timeout=REPLY_TIMEOUT_MS)
        page.click("#stop")
        page.wait_for_function(IDLE, timeout=REPLY_TIMEOUT_MS)
        stop_s = time.perf_counter() - t2
        stopped = page.evaluate(LAST_REPLY)
        time.sleep(5)
        assert page.evaluate(LAST_REPLY) == stopped               # no longer growing
        assert stopped["text"] and "stopped" in stopped["meta"], stopped
        tokens = int(re.search(r"(\d+) tokens", stopped["meta"]).group(1))
        assert 0 < tokens < 200, stopped
        assert page.evaluate(STATE) == "ready"
        assert page.evaluate(BUTTONS) == [False, True, False]
    finally:
        page.close()
    print(f"\nchat page on {adapter}: loaded in {load_s:.0f} s, first reply in {reply_s:.0f} s "
          f"({reply['meta']}), stopped reply in {stop_s:.0f} s ({stopped['meta']})")
