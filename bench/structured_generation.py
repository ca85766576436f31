#!/usr/bin/env python3
"""Generation under JSON schemas (issue P17, "Generation"): for every schema of the official
JSON-Schema-Test-Suite (draft 2020-12) that the engine compiles, plus our corpus of app schemas
(tests/data/schemas/), N samples at temperature 1 through `pocketllm serve`
(response_format json_schema, 4 requests at a time); every reply is checked with `jsonschema`.

    bench/structured_generation.py                         # SmolLM2, 20 samples per schema
    bench/structured_generation.py -m models/gemma-3-270m-it-Q4_K_M.gguf -n 20
    bench/structured_generation.py --corpus-only -n 5       # quick

Counted per reply: valid (the schema's validator accepts it), invalid (a grammar bug: must be 0),
length (max_tokens reached before the value closed: a model that rambles inside a string, not a
grammar failure, reported apart), error (the server refused or failed). Schemas the compiler
refuses are listed as such (their error is the compiler's, tested in tests/py).
"""
from __future__ import annotations

import argparse
import json
import pathlib
import sys
import time
from concurrent.futures import ThreadPoolExecutor

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "py"))

import jsonschema  # noqa: E402

from server_util import Server  # noqa: E402


def suite_schemas(suite_dir: pathlib.Path):
    for f in sorted(suite_dir.glob("*.json")):
        for i, case in enumerate(json.loads(f.read_text())):
            yield f"{f.stem}#{i}", case["schema"]


def corpus_schemas():
    for f in sorted((ROOT / "tests" / "data" / "schemas").glob("*.json")):
        yield f.stem, json.loads(f.read_text())


def ask(server, schema, seed, max_tokens):
    body = {"messages": [{"role": "user", "content": "Reply with one JSON value that follows this JSON Schema:\n"
                                                       + json.dumps(schema)}],
            "response_format": {"type": "json_schema", "json_schema": {"name": "out", "schema": schema}},
            "temperature": 1.0, "seed": seed, "max_tokens": max_tokens}
    status, data = server.post("/v1/chat/completions", body)
    if status != 200:
        return "refused" if status == 400 else "error", data.decode(errors="replace")[:300]
    choice = json.loads(data)["choices"][0]
    text = choice["message"]["content"]
    if choice["finish_reason"] == "length":
        return "length", text
    try:
        jsonschema.Draft202012Validator(schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER
                                        ).validate(json.loads(text))
        return "valid", text
    except (ValueError, jsonschema.ValidationError) as e:
        return "invalid", f"{text!r}: {e}"[:300]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-m", "--model", default=str(ROOT / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--bin", default=str(ROOT / "build" / "pocketllm"))
    # tests/py/test_json_schema_suite.py unpacks the suite from the jsonschema sdist here
    cached = sorted((ROOT / ".cache" / "json-schema-test-suite").glob("*/draft2020-12"))
    ap.add_argument("--suite", default=str(cached[-1]) if cached else None)
    ap.add_argument("-n", "--samples", type=int, default=20)
    ap.add_argument("--max-tokens", type=int, default=256)
    ap.add_argument("--corpus-only", action="store_true")
    args = ap.parse_args()

    schemas = list(corpus_schemas())
    if not args.corpus_only:
        if not args.suite:
            sys.exit("the test suite is not unpacked: run tests/py/test_json_schema_suite.py once, or pass --suite")
        schemas += list(suite_schemas(pathlib.Path(args.suite)))
    counts = {"valid": 0, "invalid": 0, "length": 0, "error": 0}
    refused, bad = [], []
    server = Server(args.bin, args.model, "--parallel", "4", ctx=4096)
    t0 = time.time()
    try:
        with ThreadPoolExecutor(4) as pool:
            for name, schema in schemas:
                first = ask(server, schema, 1, args.max_tokens)
                if first[0] == "refused":
                    refused.append(name)
                    continue
                results = [first] + list(pool.map(lambda s: ask(server, schema, s, args.max_tokens),
                                                  range(2, args.samples + 1)))
                for kind, detail in results:
                    counts[kind] += 1
                    if kind in ("invalid", "error"):
                        bad.append((name, kind, detail))
                print(f"{name}: " + " ".join(f"{k}={sum(r[0] == k for r in results)}" for k in counts), flush=True)
    finally:
        server.close()
    print(f"\nmodel {pathlib.Path(args.model).name}: {len(schemas) - len(refused)} schemas generated, "
          f"{len(refused)} refused by the compiler; {args.samples} samples each, {time.time() - t0:.0f} s")
    print("replies: " + ", ".join(f"{k} {v}" for k, v in counts.items()))
    for b in bad[:20]:
        print("  ", *b)
    return 1 if counts["invalid"] or counts["error"] else 0


if __name__ == "__main__":
    sys.exit(main())
