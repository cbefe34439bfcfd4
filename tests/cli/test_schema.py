"""docs/report-schema.json: a valid draft 2020-12 schema that real reports
satisfy and that rejects reports missing what it documents."""

import copy
import json

import pytest

from cli_harness import SCHEMA, espnn

jsonschema = pytest.importorskip("jsonschema", reason="jsonschema (the `test` extra) validates the reports")


@pytest.fixture(scope="module")
def validator():
    schema = json.loads(SCHEMA.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def test_compile_and_report_documents_validate(compiled, validator, tmp_path):
    _, d = compiled
    compile_doc = json.loads((d / "tiny.report.json").read_text())
    validator.validate(compile_doc)
    assert espnn("report", d / "tiny.pte", "--json", tmp_path / "r.json").code == 0
    validator.validate(json.loads((tmp_path / "r.json").read_text()))


@pytest.mark.parametrize("mutate", [
    lambda doc: doc.pop("verification"),
    lambda doc: doc["methods"]["forward"]["partitions"][0]["payload"].pop("arena_bytes"),
    lambda doc: doc["methods"]["forward"]["partitions"][0]["payload"].update(macs=-1),
    lambda doc: doc.update(target="esp32c3"),
    lambda doc: doc["verification"]["quantized_model"].update(top1_agreement=1.5),
    lambda doc: doc.update(unexpected_key=1),
])
def test_schema_rejects_what_it_does_not_document(compiled, validator, mutate):
    _, d = compiled
    doc = copy.deepcopy(json.loads((d / "tiny.report.json").read_text()))
    mutate(doc)
    assert not validator.is_valid(doc)
