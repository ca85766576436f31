"""Structured output through `pocketllm serve`: response_format json_object and json_schema (the
official `openai` client's `parse()` with a Pydantic model among them), `grammar` (GBNF), hot
samples that all validate with `jsonschema`, streaming equal to the whole reply, and a schema or
grammar the engine cannot enforce as a 400 naming what is wrong."""
from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from typing import List, Literal, Optional

import pytest

from server_util import Server

openai = pytest.importorskip("openai")
jsonschema = pytest.importorskip("jsonschema")
pydantic = pytest.importorskip("pydantic")

PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 30},
        "age": {"type": "integer", "minimum": 0, "maximum": 120},
        "tags": {"type": "array", "items": {"enum": ["friend", "family", "work"]}, "maxItems": 3},
    },
    "required": ["name", "age", "tags"],
    "additionalProperties": False,
}
ASK = [{"role": "user", "content": "Describe a person as JSON."}]


@pytest.fixture(scope="module")
def server(pllm_bin, smollm2_path):
    s = Server(pllm_bin, smollm2_path, "--parallel", "4")
    yield s
    s.close()
    assert s.proc.returncode == 0, s.proc.stderr.read()


def model_id(server):
    return server.client().models.list().data[0].id


def chat(server, **kw):
    return server.client().chat.completions.create(model=model_id(server), messages=kw.pop("messages", ASK), **kw)


def schema_format(schema, name="person"):
    return {"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": True}}


def test_json_object_reply_is_json(server):
    r = chat(server, response_format={"type": "json_object"}, max_tokens=200, temperature=0,
             messages=[{"role": "user", "content": "Reply with a JSON object with the keys name and age."}])
    assert r.choices[0].finish_reason == "stop", r.choices[0].message.content
    assert isinstance(json.loads(r.choices[0].message.content), dict)


def test_hot_replies_all_validate(server):
    """20 samples at temperature 1, four at a time (batched in the server's steps)."""
    def one(seed):
        r = chat(server, response_format=schema_format(PERSON), max_tokens=200, temperature=1.0, seed=seed)
        return r.choices[0].finish_reason, r.choices[0].message.content
    with ThreadPoolExecutor(4) as pool:
        replies = list(pool.map(one, range(1, 21)))
    for finish, text in replies:
        assert finish == "stop", text
        jsonschema.validate(json.loads(text), PERSON)


def test_stream_equals_whole_reply(server):
    whole = chat(server, response_format=schema_format(PERSON), max_tokens=200, temperature=0)
    chunks = list(chat(server, response_format=schema_format(PERSON), max_tokens=200, temperature=0, stream=True))
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == whole.choices[0].message.content
    jsonschema.validate(json.loads(whole.choices[0].message.content), PERSON)


def test_openai_parse_with_a_pydantic_model(server):
    class Address(pydantic.BaseModel):
        city: str
        country: Literal["France", "Japan", "Peru"]

    class Person(pydantic.BaseModel):
        name: str
        age: int
        address: Optional[Address]
        hobbies: List[str]

    r = server.client().chat.completions.parse(model=model_id(server), messages=ASK, response_format=Person, max_tokens=300,
                                               temperature=0)
    assert r.choices[0].finish_reason == "stop", r.choices[0].message.content
    p = r.choices[0].message.parsed
    assert isinstance(p, Person)


def test_gbnf_grammar_field(server):
    r = chat(server, max_tokens=20, temperature=1.0, seed=3,
             extra_body={"grammar": 'root ::= ("yes" | "no") "." '},
             messages=[{"role": "user", "content": "Is Paris in France?"}])
    assert r.choices[0].message.content in ("yes.", "no."), r.choices[0].message.content


@pytest.mark.parametrize("body,param,words", [
    ({"response_format": {"type": "json_schema", "json_schema": {"name": "t", "schema": {
        "type": "array", "uniqueItems": True}}}}, "response_format", ["uniqueItems"]),
    ({"response_format": {"type": "json_schema", "json_schema": {"name": "t", "schema": {
        "type": "object", "properties": {"a": {"not": {"type": "null"}}}}}}}, "response_format", ["not", "/properties/a"]),
    ({"response_format": {"type": "yaml"}}, "response_format", ["yaml"]),
    ({"response_format": {"type": "json_schema"}}, "response_format", ["json_schema"]),
    ({"response_format": {"type": "json_schema", "json_schema": {"schema": {}}}}, "response_format", ["name"]),
    ({"response_format": "json"}, "response_format", []),
    ({"grammar": "root ::= (", "messages": ASK}, "grammar", []),
    ({"grammar": 42}, "grammar", []),
    ({"grammar": 'root ::= "a"', "response_format": {"type": "json_object"}}, "grammar", []),
])
def test_what_cannot_be_enforced_is_a_400(server, body, param, words):
    status, data = server.post("/v1/chat/completions", {"messages": ASK, **body})
    assert status == 400, data
    err = json.loads(data)["error"]
    assert err["param"] == param, err
    for w in words:
        assert w in err["message"], err


def test_cli_run_follows_a_schema(pllm_bin, smollm2_path, work_dir):
    import pllm_cli
    schema = work_dir / "person.json"
    schema.write_text(json.dumps(PERSON))
    for seed in (1, 2, 3):
        proc = pllm_cli.run_cli(pllm_bin, ["run", "-m", smollm2_path, "-p", "Describe a person as JSON.",
                                           "--json-schema", schema, "--temp", "1", "--seed", str(seed), "-n", "200",
                                           "--json"])
        assert proc.returncode == 0, proc.stderr
        jsonschema.validate(json.loads(json.loads(proc.stdout)["text"]), PERSON)


def test_cli_grammar_flags_errors(pllm_bin, smollm2_path, work_dir):
    import pllm_cli
    bad = work_dir / "bad.json"
    bad.write_text(json.dumps({"type": "object", "properties": {"x": {"type": "string", "format": "no-such"}}}))
    gbnf = work_dir / "g.gbnf"
    gbnf.write_text('root ::= "a"\n')
    base = ["run", "-m", smollm2_path, "-p", "hi", "-n", "4"]
    msg = pllm_cli.assert_clean_error(pllm_cli.run_cli(pllm_bin, base + ["--json-schema", bad]))
    assert "format" in msg and "/properties/x" in msg, msg
    pllm_cli.assert_clean_error(pllm_cli.run_cli(pllm_bin, base + ["--json-schema", bad, "--grammar-file", gbnf]))
    pllm_cli.assert_clean_error(pllm_cli.run_cli(pllm_bin, base + ["--json-object", "--grammar-file", gbnf]))
    pllm_cli.assert_clean_error(pllm_cli.run_cli(pllm_bin, base + ["--grammar-file", work_dir / "missing.gbnf"]))
    ok = pllm_cli.run_cli(pllm_bin, base + ["--grammar-file", gbnf, "--json"])
    assert ok.returncode == 0 and json.loads(ok.stdout)["text"] == "a", ok.stderr
