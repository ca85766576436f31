"""Soundness of the JSON Schema compiler against the official JSON-Schema-Test-Suite (draft
2020-12, the top-level files, optional/ and optional/format/).

The suite ships inside the `jsonschema` sdist on PyPI; it is downloaded once (pip, from PyPI) into
<repo>/.cache/json-schema-test-suite/<version>/ (ignored by git) and skipped, saying why, when
neither the cache nor PyPI is reachable.

For every schema: `pocketllm grammar --json-schema` either refuses it with one error line that
names a keyword and a JSON pointer (counted "rejected"), or compiles it ("supported"), and then
every test instance, serialised three ways (compact, json.dumps' default separators, indent=2)
with object keys in the compiler's canonical order, must get `--check` = 1 exactly where the
instance is valid. Valid means jsonschema.Draft202012Validator (with its FORMAT_CHECKER, as the
grammar asserts formats) says valid; where jsonschema itself disagrees with the suite's label
(Python's `re` is not ECMAScript; some of its format checks are approximate or need optional
packages) the instance has no trustworthy oracle and is counted "oracle disagrees", not checked.

Canonical serialisation (what a generator emits; docs in src/constrained/json_schema.h):
  * object keys: the schema's `properties` in schema order, then keys listed in `required`
    without a property schema, then other keys (here: in the instance's order). Through $ref and
    allOf the schema's own properties come first, then the $ref target's, then each allOf
    branch's; through anyOf/oneOf those of the first branch the instance is valid against.
  * strings: raw UTF-8 (ensure_ascii=False), JSON's short escapes (json.dumps' choice).
"""
from __future__ import annotations

import importlib.metadata
import json
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import urllib.parse
from pathlib import Path

import pytest

import pllm_cli

jsonschema = pytest.importorskip("jsonschema")

CACHE = pllm_cli.REPO / ".cache" / "json-schema-test-suite"
ERROR_RE = re.compile(r"^error: (\S+) at (/\S*)(: | )")


def _suite_dir() -> Path:
    version = importlib.metadata.version("jsonschema")
    dest = CACHE / version
    if (dest / "draft2020-12").is_dir():
        return dest / "draft2020-12"
    with tempfile.TemporaryDirectory() as tmp:
        proc = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--disable-pip-version-check",
                               "--no-binary", ":all:", "--no-deps", f"jsonschema=={version}", "-d", tmp],
                              capture_output=True, timeout=300)
        sdists = list(Path(tmp).glob("jsonschema-*.tar.gz"))
        if proc.returncode != 0 or not sdists:
            pytest.skip(f"JSON-Schema-Test-Suite not cached at {dest} and the jsonschema sdist could not be "
                        f"downloaded from PyPI: {proc.stderr.decode(errors='replace')[-300:]}")
        part = dest.with_name(dest.name + ".part")
        shutil.rmtree(part, ignore_errors=True)
        with tarfile.open(sdists[0]) as tar:
            for m in tar.getmembers():
                rel = m.name.split("/json/tests/", 1)
                if len(rel) == 2 and rel[1].startswith("draft2020-12/") and m.isfile():
                    out = part / rel[1]
                    out.parent.mkdir(parents=True, exist_ok=True)
                    out.write_bytes(tar.extractfile(m).read())
        shutil.rmtree(dest, ignore_errors=True)
        part.rename(dest)
    return dest / "draft2020-12"


@pytest.fixture(scope="module")
def suite_dir() -> Path:
    return _suite_dir()


def json_equal(a, b) -> bool:
    """JSON equality (True is not 1, 1 is 1.0)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


def like_literal(inst, value):
    """inst with object keys in the order of the equal enum/const value."""
    if isinstance(inst, dict) and isinstance(value, dict):
        return {k: like_literal(inst[k], value[k]) for k in value}
    if isinstance(inst, list) and isinstance(value, list):
        return [like_literal(x, y) for x, y in zip(inst, value)]
    return inst


class Canonicaliser:
    """Reorders instance keys the way the compiler orders them (see the module docstring)."""

    def __init__(self, root, validator):
        self.root = root
        self.validator = validator

    def resolve(self, ref: str):
        """A local JSON pointer reference (the compiler refuses any other kind)."""
        frag = urllib.parse.unquote(ref.split("#", 1)[1]) if "#" in ref else ""
        node = self.root
        try:
            for raw in frag.split("/")[1:]:
                tok = raw.replace("~1", "/").replace("~0", "~")
                node = node[int(tok)] if isinstance(node, list) else node[tok]
        except (KeyError, IndexError, ValueError, TypeError):
            return True
        return node

    def valid(self, inst, schema) -> bool:
        try:
            return self.validator.evolve(schema=schema).is_valid(inst)
        except Exception:  # noqa: BLE001 - an unresolvable branch is simply not chosen
            return False

    def expand(self, schemas, inst, depth=0):
        """The conjunction as a flat list of plain schemas, in the compiler's merge order."""
        out = []
        for s in schemas:
            if not isinstance(s, dict) or depth > 40:
                continue
            own = {k: v for k, v in s.items() if k not in ("$ref", "allOf", "anyOf", "oneOf")}
            out.append(own)
            if isinstance(s.get("$ref"), str):
                out += self.expand([self.resolve(s["$ref"])], inst, depth + 1)
            for b in s.get("allOf", []) if isinstance(s.get("allOf"), list) else []:
                out += self.expand([b], inst, depth + 1)
            for key in ("anyOf", "oneOf"):
                branches = s.get(key)
                if isinstance(branches, list) and branches:
                    chosen = next((b for b in branches if self.valid(inst, b)), branches[0])
                    out += self.expand([chosen], inst, depth + 1)
        return out

    def canon(self, inst, schemas, depth=0):
        flat = self.expand(schemas, inst)
        for s in flat:
            values = [s["const"]] if "const" in s else s.get("enum") if isinstance(s.get("enum"), list) else None
            for v in values or []:
                if json_equal(v, inst):
                    return like_literal(inst, v)
        if isinstance(inst, dict):
            order = []
            for s in flat:
                for k in s.get("properties", {}) if isinstance(s.get("properties"), dict) else {}:
                    if k not in order:
                        order.append(k)
            for s in flat:
                for k in s.get("required", []) if isinstance(s.get("required"), list) else []:
                    if k not in order:
                        order.append(k)
            keys = [k for k in order if k in inst] + [k for k in inst if k not in order]
            out = {}
            for k in keys:
                subs = []
                for s in flat:
                    props = s.get("properties") if isinstance(s.get("properties"), dict) else {}
                    if k in props:
                        subs.append(props[k])
                    elif "additionalProperties" in s:
                        subs.append(s["additionalProperties"])
                out[k] = self.canon(inst[k], subs, depth + 1)
            return out
        if isinstance(inst, list):
            out = []
            for i, x in enumerate(inst):
                subs = []
                for s in flat:
                    prefix = s.get("prefixItems") if isinstance(s.get("prefixItems"), list) else []
                    if i < len(prefix):
                        subs.append(prefix[i])
                    elif "items" in s:
                        subs.append(s["items"])
                out.append(self.canon(x, subs, depth + 1))
            return out
        return inst


def serialisations(value) -> list[str]:
    return [json.dumps(value, separators=(",", ":"), ensure_ascii=False),
            json.dumps(value, ensure_ascii=False),
            json.dumps(value, indent=2, ensure_ascii=False)]


def suite_files(root: Path) -> list[Path]:
    return sorted(root.glob("*.json")) + sorted((root / "optional").glob("*.json")) + \
        sorted((root / "optional" / "format").glob("*.json"))


def test_json_schema_test_suite(pllm_bin, suite_dir, tmp_path):
    from jsonschema import Draft202012Validator

    counts = {"supported": 0, "rejected": 0, "wrong": 0, "instances": 0, "oracle_disagrees": 0,
              "unencodable": 0}
    wrong, rejected_by_keyword = [], {}
    files = suite_files(suite_dir)
    assert len(files) > 40, f"expected the draft 2020-12 suite under {suite_dir}"
    for path in files:
        rel = path.relative_to(suite_dir)
        for ci, case in enumerate(json.loads(path.read_text(encoding="utf-8"))):
            schema_file = tmp_path / "schema.json"
            schema_file.write_text(json.dumps(case["schema"]), encoding="utf-8")
            # The oracle first: which instances are valid, and where jsonschema and the suite agree.
            validator = Draft202012Validator(case["schema"], format_checker=Draft202012Validator.FORMAT_CHECKER)
            canon = Canonicaliser(case["schema"], validator)
            texts, expect = [], []
            for test in case["tests"]:
                try:
                    verdict = validator.is_valid(test["data"])
                except Exception:  # noqa: BLE001 - e.g. an unresolvable remote $ref
                    verdict = None
                if verdict is None or verdict != test["valid"]:
                    counts["oracle_disagrees"] += 1
                    continue
                for text in serialisations(canon.canon(test["data"], [case["schema"]])):
                    try:
                        text.encode("utf-8")
                    except UnicodeEncodeError:  # a lone surrogate: no UTF-8 text exists
                        counts["unencodable"] += 1
                        continue
                    texts.append(text)
                    expect.append((verdict, test["description"], text))
            check_file = tmp_path / "check.jsonl"
            check_file.write_text("".join(json.dumps(t) + "\n" for t in texts), encoding="utf-8")
            proc = pllm_cli.run_cli(pllm_bin, ["grammar", "--json-schema", schema_file, "--check", check_file])
            label = f"{rel}[{ci}] {case['description']}"
            if proc.returncode != 0:
                msg = pllm_cli.assert_clean_error(proc)
                m = ERROR_RE.match(msg)
                assert m, f"{label}: the error must name a keyword and a JSON pointer: {msg}"
                counts["rejected"] += 1
                rejected_by_keyword[m.group(1)] = rejected_by_keyword.get(m.group(1), 0) + 1
                continue
            counts["supported"] += 1
            got = proc.stdout.decode().split()
            assert len(got) == len(texts), f"{label}: {len(got)} answers for {len(texts)} texts"
            for (valid, desc, text), answer in zip(expect, got):
                counts["instances"] += 1
                if (answer == "1") != valid:
                    counts["wrong"] += 1
                    wrong.append(f"{label} / {desc}: valid={valid} grammar={answer} text={text!r}")
    print(f"\nJSON-Schema-Test-Suite draft2020-12: {counts['supported']} schemas supported, "
          f"{counts['rejected']} rejected with an error, {counts['wrong']} wrong answers "
          f"({counts['instances']} instance texts checked; {counts['oracle_disagrees']} instances where "
          f"jsonschema disagrees with the suite not checked; {counts['unencodable']} texts not UTF-8)")
    print("rejected by keyword:", dict(sorted(rejected_by_keyword.items(), key=lambda kv: -kv[1])))
    assert not wrong, f"{len(wrong)} wrong answers:\n" + "\n".join(wrong[:40])
    assert counts["supported"] >= 150, counts


CORPUS = pllm_cli.REPO / "tests" / "data" / "schemas"


@pytest.mark.parametrize("name", sorted(json.loads((CORPUS / "examples.json").read_text()).keys()))
def test_app_schema_corpus(pllm_bin, tmp_path, name):
    """Realistic app schemas compile; hand-written examples get --check = jsonschema's verdict,
    in every serialisation style."""
    from jsonschema import Draft202012Validator

    examples = json.loads((CORPUS / "examples.json").read_text())[name]
    schema = json.loads((CORPUS / name).read_text())
    validator = Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)
    texts, expect = [], []
    for valid_label, values in (("valid", examples["valid"]), ("invalid", examples["invalid"])):
        for v in values:
            assert validator.is_valid(v) == (valid_label == "valid"), f"{name}: example mislabelled: {v}"
            for text in serialisations(v):
                texts.append(text)
                expect.append(valid_label == "valid")
    check = tmp_path / "check.jsonl"
    check.write_text("".join(json.dumps(t) + "\n" for t in texts), encoding="utf-8")
    proc = pllm_cli.check_ok(pllm_cli.run_cli(pllm_bin, ["grammar", "--json-schema", CORPUS / name, "--check", check]))
    got = proc.stdout.decode().split()
    assert [g == "1" for g in got] == expect, "\n".join(
        f"{'valid' if e else 'invalid'} -> {g}: {t}" for t, e, g in zip(texts, expect, got) if (g == "1") != e)


def test_grammar_cli_errors(pllm_bin, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"properties": {"tags": {"type": "array", "uniqueItems": true}}}')
    msg = pllm_cli.assert_clean_error(pllm_cli.run_cli(pllm_bin, ["grammar", "--json-schema", bad, "--print"]))
    assert msg == "error: uniqueItems at /properties/tags: not supported", msg
    pllm_cli.assert_clean_error(pllm_cli.run_cli(pllm_bin, ["grammar", "--json-schema", tmp_path / "missing.json", "--print"]))
    notjson = tmp_path / "notjson.json"
    notjson.write_text("{")
    pllm_cli.assert_clean_error(pllm_cli.run_cli(pllm_bin, ["grammar", "--json-schema", notjson, "--print"]))
    gbnf = tmp_path / "g.gbnf"
    gbnf.write_text('root ::= "a" undefined-rule\n')
    pllm_cli.assert_clean_error(pllm_cli.run_cli(pllm_bin, ["grammar", "--grammar-file", gbnf, "--print"]))
    pllm_cli.assert_clean_error(pllm_cli.run_cli(pllm_bin, ["grammar", "--print"]))
    check = tmp_path / "c.jsonl"
    check.write_text("not json\n")
    pllm_cli.assert_clean_error(pllm_cli.run_cli(pllm_bin, ["grammar", "--json", "--check", check]))
    check.write_text('"{\\"a\\": 1}"\n"[1,"\n\n"null"\n')
    out = pllm_cli.check_ok(pllm_cli.run_cli(pllm_bin, ["grammar", "--json", "--check", check])).stdout.decode()
    assert out.split() == ["1", "0", "1"]
    printed = pllm_cli.check_ok(pllm_cli.run_cli(pllm_bin, ["grammar", "--json", "--print"])).stdout.decode()
    assert printed.startswith("root ::= ")
