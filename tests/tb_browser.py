"""TensorBoard's pages as a person sees them: Debian's Chromium, headless, against a real TensorBoard server.

TensorBoard draws the graph inside web components (shadow DOM), which Chromium's `--dump-dom` leaves out. So
the page is loaded through a small same-origin proxy on loopback that also serves a probe page: the probe shows
TensorBoard's page in a full-size frame, and copies the text of every shadow root (the graph's node labels
included) into its own DOM, which `--dump-dom` prints. The screenshot is of TensorBoard's page itself.

A missing `chromium` is a failure, never a skip (the CI installs it: .ci/run).
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import tempfile
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

PROBE_PATH = "/__tfhydra_probe__.html"
PROBE = """<!doctype html><html><body style="margin:0">
<iframe id="board" src="%(page)s" style="width:1400px;height:1000px;border:0"></iframe>
<pre id="found"></pre>
<script>
function collect(root, out) {
  for (const el of root.querySelectorAll('*')) {
    // an SVG label: a graph node's name, as drawn (maybe cut short) and in full (its <title>)
    if (el.localName === 'text') for (const part of el.childNodes) out.push('label: ' + part.textContent);
    if (el.shadowRoot) { out.push(el.shadowRoot.textContent); collect(el.shadowRoot, out); }
  }
}
function look() {
  const frame = document.getElementById('board').contentDocument;
  if (frame && frame.body) {
    const out = [frame.body.innerText];
    collect(frame, out);
    document.getElementById('found').textContent = out.join('\\n');
  }
  setTimeout(look, 500);
}
setTimeout(look, 500);
</script></body></html>"""

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
]


def chromium() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    assert path, "chromium is not installed (Debian: apt-get install -y chromium; .ci/run installs it)"
    return path


@contextlib.contextmanager
def probing_proxy(board_url: str, page: str) -> Iterator[str]:
    """A loopback server forwarding every request to TensorBoard at `board_url` and serving the probe page of
    `page` (a TensorBoard URL path such as `/#graphs`); yields the probe page's URL."""

    class Forward(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def _answer(self, status: int, headers, body: bytes) -> None:
            self.send_response(status)
            for name, value in headers:
                if name.lower() not in ("transfer-encoding", "connection", "content-length"):
                    self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _forward(self, data: bytes | None = None) -> None:
            if self.path == PROBE_PATH:
                return self._answer(200, [("Content-Type", "text/html")], (PROBE % {"page": page}).encode())
            headers = {k: v for k, v in self.headers.items() if k.lower() in ("content-type", "accept")}
            request = urllib.request.Request(board_url + self.path, data=data, headers=headers, method=self.command)
            try:
                with urllib.request.urlopen(request, timeout=60) as response:
                    self._answer(response.status, response.getheaders(), response.read())
            except urllib.error.HTTPError as error:
                self._answer(error.code, error.headers.items(), error.read())

        def do_GET(self):
            self._forward()

        def do_POST(self):
            self._forward(self.rfile.read(int(self.headers.get("Content-Length") or 0)))

    server = ThreadingHTTPServer(("127.0.0.1", 0), Forward)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}{PROBE_PATH}"
    finally:
        server.shutdown()
        server.server_close()


def run_chromium(url: str, *extra: str, budget_ms: int = 30000, timeout: float = 300) -> str:
    """Chromium on `url` with a fresh profile; returns what it printed on stdout."""
    with tempfile.TemporaryDirectory(prefix="tfhydra-chromium-") as profile:
        result = subprocess.run(
            [
                chromium(),
                *FLAGS,
                f"--user-data-dir={profile}",
                "--window-size=1400,1000",
                f"--virtual-time-budget={budget_ms}",
                *extra,
                url,
            ],
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )
    assert result.returncode == 0, f"chromium exited {result.returncode}: {result.stderr[-2000:]}"
    return result.stdout


def page_text(board_url: str, page: str, budget_ms: int = 30000) -> str:
    """The text a person would read on TensorBoard's `page`, shadow roots included; each SVG label (a graph
    node's name) on a line of its own as `label: <name>`."""
    import html

    with probing_proxy(board_url, page) as probe:
        return html.unescape(run_chromium(probe, "--dump-dom", budget_ms=budget_ms))


def svg_labels(text: str) -> set[str]:
    """The SVG labels `page_text` found (the graph's node names, as drawn)."""
    return {line[len("label: ") :].strip() for line in text.splitlines() if line.startswith("label: ")}


def screenshot(board_url: str, page: str, path: Path, budget_ms: int = 30000) -> Path:
    run_chromium(board_url + page, f"--screenshot={path}", budget_ms=budget_ms)
    return path
