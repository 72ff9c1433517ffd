#!/usr/bin/python3
"""Validates a firstfault JSON report (stdin) against schemas/report-v1.schema.json. Exit 0 when valid."""
import json, sys
from pathlib import Path
import jsonschema

schema = json.loads((Path(__file__).resolve().parents[2] / "schemas" / "report-v1.schema.json").read_text())
report = json.load(sys.stdin)
jsonschema.validate(report, schema, cls=jsonschema.Draft202012Validator)
print("valid")
