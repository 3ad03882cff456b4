"""FarmRunner's Swift types and the runner contract's JSON Schemas in lock-step.

The app cannot be compiled here, so its `Codable` types are read from the Swift source: each
struct's stored properties and the JSON keys its `CodingKeys` enum spells. Every key a Swift type
declares must be a property of the schema object it decodes, and every schema property must have
a key in the type (else the app would drop a field the host writes, or write one the host
refuses). The contract's example files are decoded with the schemas and read through the same
keys, as `swift test` decodes them on a Mac.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

from ondevice_farm_agents.ios.contract import JOB_SCHEMA, RESULT_SCHEMA, contract_errors, schema

CONTRACT_SWIFT = (
    Path(__file__).resolve().parents[2]
    / "agents/ondevice_farm_agents/ios/FarmRunner/Sources/FarmRunnerCore/Contract.swift"
)
#: Swift type -> (schema file, JSON pointer of the object it decodes)
LOCATIONS: dict[str, tuple[str, str]] = {
    "JobFile": (JOB_SCHEMA, ""),
    "JobFile.Model": (JOB_SCHEMA, "/properties/model"),
    "JobFile.Thermal": (JOB_SCHEMA, "/properties/thermal"),
    "JobFile.Sustained": (JOB_SCHEMA, "/properties/sustained"),
    "TensorFile": (JOB_SCHEMA, "/$defs/tensor_file"),
    "OutputName": (JOB_SCHEMA, "/$defs/output_name"),
    "ResultFile": (RESULT_SCHEMA, ""),
    "ResultFile.Failure": (RESULT_SCHEMA, "/properties/error"),
    "ResultFile.Runner": (RESULT_SCHEMA, "/properties/runner"),
    "ResultFile.Timings": (RESULT_SCHEMA, "/properties/timings_ms"),
    "ResultFile.ThermalReport": (RESULT_SCHEMA, "/properties/thermal"),
    "ResultFile.Memory": (RESULT_SCHEMA, "/properties/memory"),
    "ResultFile.PlannedOp": (RESULT_SCHEMA, "/$defs/planned_op"),
    "ResultFile.ComputePlan": (RESULT_SCHEMA, "/properties/compute_plan"),
    "ResultFile.Spans": (RESULT_SCHEMA, "/properties/spans_unix_s"),
    "ResultFile.Sustained": (RESULT_SCHEMA, "/properties/sustained"),
    "ResultFile.SustainedWindow": (RESULT_SCHEMA, "/$defs/window"),
    "ResultFile.SustainedTelemetry": (RESULT_SCHEMA, "/$defs/telemetry"),
}
#: where a result's outputs are TensorFiles too
ALSO_DECODED_AS = {"TensorFile": [(RESULT_SCHEMA, "/$defs/tensor_file")]}

_STRUCT = re.compile(r"^\s*(?:public\s+)?struct\s+(\w+)\s*:\s*([^{]*)\{")
_PROPERTY = re.compile(r"^\s*(?:public\s+)?(?:let|var)\s+(\w+)\s*:")
_CODING_KEYS = re.compile(r"^\s*(?:public\s+)?enum\s+CodingKeys\s*:\s*String\s*,\s*CodingKey\s*\{")
_CASE = re.compile(r"^\s*case\s+(.+)$")


@dataclass
class SwiftType:
    name: str
    properties: list[str] = field(default_factory=list)
    #: Swift case name -> JSON key
    keys: dict[str, str] = field(default_factory=dict)


def parse_codable(source: str) -> dict[str, SwiftType]:
    """Every `Codable` struct of `source` (nested ones as `Outer.Inner`): stored properties and keys."""
    found: dict[str, SwiftType] = {}
    stack: list[tuple[str, int, bool]] = []  # (qualified name, depth inside its body, codable)
    depth = 0
    in_keys: SwiftType | None = None
    for raw in source.splitlines():
        line = raw.split("//")[0]
        struct = _STRUCT.match(line)
        current = stack[-1] if stack else None
        if struct:
            qualified = ".".join([*(s[0] for s in stack), struct.group(1)])
            codable = "Codable" in struct.group(2)
            stack.append((qualified, depth + 1, codable))
            if codable:
                found[qualified] = SwiftType(qualified)
        elif in_keys is not None:
            case = _CASE.match(line)
            if case:
                for part in case.group(1).split(","):
                    swift, _, json_key = part.partition("=")
                    in_keys.keys[swift.strip()] = json_key.strip().strip('"') or swift.strip()
        elif current is not None and current[2] and depth == current[1]:
            if _CODING_KEYS.match(line):
                in_keys = found[current[0]]
            elif (prop := _PROPERTY.match(line)) and "{" not in line:  # computed properties have bodies
                found[current[0]].properties.append(prop.group(1))
        depth += line.count("{") - line.count("}")
        if in_keys is not None and current is not None and depth == current[1]:
            in_keys = None
        while stack and depth < stack[-1][1]:
            stack.pop()
    return found


def at(schema_name: str, pointer: str) -> dict[str, Any]:
    node: Any = schema(schema_name)
    for part in [p for p in pointer.split("/") if p]:
        node = node[part]
    return dict(node)


def lockstep_problems(types: dict[str, SwiftType]) -> list[str]:
    problems = []
    for name, (schema_name, pointer) in LOCATIONS.items():
        if name not in types:
            problems.append(f"{name}: no Codable struct of that name in Contract.swift")
            continue
        swift = types[name]
        unkeyed = [p for p in swift.properties if p not in swift.keys]
        if unkeyed:
            problems.append(f"{name}: stored properties without a CodingKeys case: {unkeyed}")
        for schema_name_, pointer_ in [(schema_name, pointer), *ALSO_DECODED_AS.get(name, [])]:
            declared = set(at(schema_name_, pointer_).get("properties", {}))
            keys = set(swift.keys.values())
            for key in sorted(keys - declared):
                problems.append(f"{name}: key {key!r} is not in {schema_name_}#{pointer_ or '/'}")
            for key in sorted(declared - keys):
                problems.append(
                    f"{name}: {schema_name_}#{pointer_ or '/'} property {key!r} has no CodingKeys case"
                )
    return problems


def test_every_key_the_swift_types_declare_is_in_the_schemas_and_back() -> None:
    types = parse_codable(CONTRACT_SWIFT.read_text())
    assert set(LOCATIONS) <= set(types), sorted(types)
    assert types["JobFile"].keys["jobId"] == "job_id"
    assert types["TensorFile"].keys["onnxName"] == "onnx_name"
    assert lockstep_problems(types) == []


def test_a_key_the_schema_lacks_is_caught() -> None:
    # the check must be able to fail: a Swift field the schema does not know, and one it forgot
    source = CONTRACT_SWIFT.read_text().replace('case jobId = "job_id"', 'case jobId = "jobId"', 1)
    source = source.replace(
        '        case peakFootprintBytes = "peak_footprint_bytes"\n',
        '        case peakFootprintBytes = "peak_footprint_bytes"\n        case swapBytes = "swap_bytes"\n',
    )
    problems = lockstep_problems(parse_codable(source))
    assert "JobFile: key 'jobId' is not in job.schema.json#/" in problems
    assert "JobFile: job.schema.json#/ property 'job_id' has no CodingKeys case" in problems
    assert "ResultFile.Memory: key 'swap_bytes' is not in result.schema.json#/properties/memory" in problems


def _example(name: str) -> dict[str, Any]:
    text = resources.files("ondevice_farm_agents.ios").joinpath("runner_contract").joinpath(name).read_text()
    loaded: dict[str, Any] = json.loads(text)
    return loaded


@pytest.mark.parametrize(
    ("example", "schema_name", "objects"),
    [
        ("example-job.json", JOB_SCHEMA, {
            "JobFile": lambda d: [d], "JobFile.Model": lambda d: [d["model"]],
            "JobFile.Thermal": lambda d: [d["thermal"]], "JobFile.Sustained": lambda d: [d["sustained"]],
            "TensorFile": lambda d: d["inputs"], "OutputName": lambda d: d["outputs"]}),
        ("example-result.json", RESULT_SCHEMA, {
            "ResultFile": lambda d: [d], "ResultFile.Runner": lambda d: [d["runner"]],
            "ResultFile.Timings": lambda d: [d["timings_ms"]],
            "ResultFile.ThermalReport": lambda d: [d["thermal"]],
            "ResultFile.Memory": lambda d: [d["memory"]],
            "TensorFile": lambda d: d["outputs"],
            "ResultFile.ComputePlan": lambda d: [d["compute_plan"]],
            "ResultFile.PlannedOp": lambda d: d["compute_plan"]["ops"],
            "ResultFile.Spans": lambda d: [d["spans_unix_s"]],
            "ResultFile.Sustained": lambda d: [d["sustained"]],
            "ResultFile.SustainedWindow": lambda d: d["sustained"]["windows"],
            "ResultFile.SustainedTelemetry": lambda d: [d["sustained"]["start"]]}),
        ("example-error-result.json", RESULT_SCHEMA, {
            "ResultFile": lambda d: [d], "ResultFile.Failure": lambda d: [d["error"]]}),
    ],
)  # fmt: skip
def test_the_examples_decode_under_the_schemas_and_the_swift_keys(
    example: str, schema_name: str, objects: dict[str, Any]
) -> None:
    document = _example(example)
    assert contract_errors(document, schema_name) == []
    types = parse_codable(CONTRACT_SWIFT.read_text())
    for type_name, pick in objects.items():
        keys = set(types[type_name].keys.values())
        for obj in pick(document):
            assert set(obj) <= keys, f"{example}: {type_name} would not read {sorted(set(obj) - keys)}"
