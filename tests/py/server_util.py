"""A `pocketllm serve` process for the tests (test_server.py, test_web_chat.py): started on a free
port (the port is read from the listening line on stderr), ready once /health answers 200."""
from __future__ import annotations

import http.client
import json
import re
import subprocess
import time


class Server:
    def __init__(self, binary, model, *extra, ctx=512):
        self.proc = subprocess.Popen([str(binary), "serve", "-m", str(model), "--port", "0", "-c", str(ctx), *extra],
                                     stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
        line = self.proc.stderr.readline()
        m = re.search(r"http://[\d.]+:(\d+)", line)
        assert m, f"no listening line: {line!r}"
        self.port = int(m.group(1))
        self.url = f"http://127.0.0.1:{self.port}"
        deadline = time.time() + 60
        while time.time() < deadline:
            status, _ = self.get("/health")
            if status == 200:
                return
            assert status == 503, status  # loading
            time.sleep(0.1)
        raise AssertionError("server never became ready")

    def request(self, method, path, body=None, headers=None):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
        c.request(method, path, body=body, headers=headers or {})
        r = c.getresponse()
        data = r.read()
        c.close()
        return r.status, data

    def get(self, path):
        return self.request("GET", path)

    def post(self, path, obj, headers=None):
        body = obj if isinstance(obj, (bytes, str)) else json.dumps(obj)
        return self.request("POST", path, body, {"Content-Type": "application/json", **(headers or {})})

    def client(self, key="none"):
        import openai  # the callers that use it importorskip it
        return openai.OpenAI(base_url=f"{self.url}/v1", api_key=key, max_retries=0)

    def metrics(self):
        from prometheus_client import parser as prom_parser  # the callers that use it importorskip it
        status, data = self.get("/metrics")
        assert status == 200
        return {s.name: s.value for f in prom_parser.text_string_to_metric_families(data.decode())
                for s in f.samples if not s.labels or "le" not in s.labels}

    def close(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise
