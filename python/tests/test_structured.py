"""Constrained replies: response_format (OpenAI's dicts or a Pydantic model class) and GBNF
grammars; what the engine cannot enforce is an InvalidArgument naming it."""
from __future__ import annotations

import json

import pytest

import pocketllm

ASK = [{"role": "user", "content": "Describe a person as JSON."}]
PERSON = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 20},
                                           "age": {"type": "integer", "minimum": 0, "maximum": 120}},
          "required": ["name", "age"], "additionalProperties": False}


def test_json_schema_reply_validates(model):
    jsonschema = pytest.importorskip("jsonschema")
    for seed in range(1, 6):
        reply = model.chat(ASK, max_tokens=120, temperature=1.0, seed=seed,
                           response_format={"type": "json_schema", "json_schema": {"name": "p", "schema": PERSON}})
        assert reply.stats.stop_reason == "eog", reply
        jsonschema.validate(json.loads(reply), PERSON)


def test_pydantic_model_class(model):
    pydantic = pytest.importorskip("pydantic")

    class Person(pydantic.BaseModel):
        name: str
        age: int

    reply = model.chat(ASK, max_tokens=120, response_format=Person)
    assert reply.stats.stop_reason == "eog", reply
    Person.model_validate_json(reply)


def test_json_object_and_grammar(model):
    obj = model.chat([{"role": "user", "content": "Reply with a JSON object with the keys name and age."}],
                     max_tokens=200, response_format={"type": "json_object"})
    assert isinstance(json.loads(obj), dict), obj
    reply = model.chat([{"role": "user", "content": "Is Paris in France?"}], max_tokens=8,
                       grammar='root ::= ("yes" | "no") "."')
    assert reply in ("yes.", "no."), reply


@pytest.mark.parametrize("kw,words", [
    ({"response_format": {"type": "json_schema", "json_schema": {"name": "t", "schema": {"uniqueItems": True,
                                                                                         "type": "array"}}}},
     ["uniqueItems"]),
    ({"response_format": {"type": "yaml"}}, ["yaml"]),
    ({"response_format": "json"}, []),
    ({"grammar": "root ::= ("}, ["grammar"]),
    ({"grammar": 'root ::= "a"', "response_format": {"type": "json_object"}}, []),
])
def test_what_cannot_be_enforced_raises(model, kw, words):
    with pytest.raises(pocketllm.InvalidArgument) as e:
        model.chat(ASK, max_tokens=4, **kw)
    for w in words:
        assert w in str(e.value), e.value
