"""A real Prometheus (Debian's ``prometheus`` package) scraping a stand-in DCGM exporter, for tests.

The stand-in serves what NVIDIA's dcgm-exporter serves with its Kubernetes pod mapping on: the
``DCGM_FI_DEV_GPU_UTIL`` and ``DCGM_FI_DEV_FB_USED`` gauges, one series per GPU, labelled ``gpu``,
``UUID``, ``pci_bus_id``, ``device``, ``modelName``, ``Hostname`` and, for a GPU a container holds,
``container``, ``namespace`` and ``pod``. Tests set the GPUs it reports; Prometheus scrapes it
every second.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import socket
import subprocess
import threading
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

PROMETHEUS = shutil.which("prometheus") or "/usr/bin/prometheus"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Gpu:
    """One GPU as dcgm-exporter reports it; ``pod`` empty for a GPU no container holds."""

    hostname: str
    index: int
    utilisation: float
    memory_used_mib: float
    namespace: str = ""
    pod: str = ""
    container: str = "main"

    def labels(self) -> str:
        pairs = {
            "gpu": str(self.index),
            "UUID": "GPU-" + hashlib.md5(f"{self.hostname}/{self.index}".encode()).hexdigest(),
            "pci_bus_id": f"00000000:{self.index + 7:02X}:00.0",
            "device": f"nvidia{self.index}",
            "modelName": "NVIDIA H100 80GB HBM3",
            "Hostname": self.hostname,
            "DCGM_FI_DRIVER_VERSION": "550.54.15",
        }
        if self.pod:
            pairs |= {"container": self.container, "namespace": self.namespace, "pod": self.pod}
        return ",".join(f'{k}="{v}"' for k, v in pairs.items())


class StandInExporter:
    """``/metrics`` in the Prometheus text format, with the GPUs a test sets."""

    def __init__(self) -> None:
        self.gpus: list[Gpu] = []
        self.port = free_port()
        exporter = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                body = exporter.text().encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def text(self) -> str:
        lines = [
            "# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).",
            "# TYPE DCGM_FI_DEV_GPU_UTIL gauge",
            *(f"DCGM_FI_DEV_GPU_UTIL{{{g.labels()}}} {g.utilisation:g}" for g in self.gpus),
            "# HELP DCGM_FI_DEV_FB_USED Framebuffer memory used (in MiB).",
            "# TYPE DCGM_FI_DEV_FB_USED gauge",
            *(f"DCGM_FI_DEV_FB_USED{{{g.labels()}}} {g.memory_used_mib:g}" for g in self.gpus),
        ]
        return "\n".join(lines) + "\n"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class PrometheusServer:
    """Debian's Prometheus on a free loopback port, scraping ``exporter`` every second."""

    def __init__(self, workdir: Path, exporter: StandInExporter) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = workdir / "prometheus.yml"
        config.write_text(
            "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
            "scrape_configs:\n"
            "  - job_name: dcgm-exporter\n"
            "    honor_labels: true\n"
            f"    static_configs: [{{targets: ['127.0.0.1:{exporter.port}']}}]\n"
        )
        self.log = (workdir / "prometheus.log").open("wb")
        self.process = subprocess.Popen(
            [PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={workdir / 'data'}",
             f"--web.listen-address=127.0.0.1:{self.port}", "--log.level=warn"],
            stdout=self.log, stderr=subprocess.STDOUT,
        )  # fmt: skip
        self._wait_ready()

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"prometheus exited with {self.process.returncode}; see {self.log.name}")
            try:
                with urllib.request.urlopen(f"{self.url}/-/ready", timeout=1) as response:
                    if response.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"prometheus did not become ready in 60 s; see {self.log.name}")

    def series(self, promql: str) -> list[dict[str, Any]]:
        query = urllib.parse.urlencode({"query": promql})
        with urllib.request.urlopen(f"{self.url}/api/v1/query?{query}", timeout=5) as response:
            return list(json.load(response)["data"]["result"])

    def wait_for(self, promql: str, count: int, timeout: float = 30) -> None:
        """Until ``promql`` returns ``count`` series (the scrapes the test set up have landed)."""
        deadline = time.monotonic() + timeout
        found: list[dict[str, Any]] = []
        while time.monotonic() < deadline:
            found = self.series(promql)
            if len(found) == count:
                return
            time.sleep(0.25)
        raise AssertionError(f"{promql} gave {len(found)} series, not {count}, within {timeout} s: {found}")

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.log.close()
