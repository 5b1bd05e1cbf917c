"""Message classes of the summary format, built at import from the ``.proto`` files.

The three files under ``collector/_protos/`` are the single source of truth for the
message names and field numbers (MindSpore's ``anf_ir.proto``, ``summary.proto`` and
``lineage.proto``, reduced to what summaries use). Rather than committing protoc output
(which pins a protobuf runtime version), this module parses that small proto2 subset
into ``FileDescriptorProto`` objects, adds them to a private descriptor pool and asks
protobuf for the message classes. The protobuf library does all encoding and decoding.

The subset understood: ``syntax``, ``package``, ``import``, ``enum``, nested
``message``, ``oneof``, ``map<K, V>``, ``optional``/``required``/``repeated`` fields
and the ``[packed = true]`` option. Anything else is a ``SyntaxError`` at import, so
a typo in a ``.proto`` file cannot slip through silently.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

__all__ = ["POOL", "PACKAGE", "message_class", "PROTO_DIR", "MESSAGES"]

PROTO_DIR = Path(__file__).with_name("_protos")
PACKAGE = "mindspore.irpb"
_FILES = ("anf_ir.proto", "summary.proto", "lineage.proto")

_F = descriptor_pb2.FieldDescriptorProto
_SCALAR_TYPES = {
    "double": _F.TYPE_DOUBLE,
    "float": _F.TYPE_FLOAT,
    "int64": _F.TYPE_INT64,
    "uint64": _F.TYPE_UINT64,
    "int32": _F.TYPE_INT32,
    "uint32": _F.TYPE_UINT32,
    "bool": _F.TYPE_BOOL,
    "string": _F.TYPE_STRING,
    "bytes": _F.TYPE_BYTES,
}
_LABELS = {"optional": _F.LABEL_OPTIONAL, "required": _F.LABEL_REQUIRED, "repeated": _F.LABEL_REPEATED}
_TOKEN = re.compile(r'"[^"]*"|[A-Za-z_][A-Za-z0-9_.]*|-?0x[0-9a-fA-F]+|-?\d+|[{}=;<>,\[\]()]')


def _tokenize(text: str) -> list[str]:
    text = re.sub(r"//[^\n]*", "", text)
    return _TOKEN.findall(text)


class _Parser:
    """Recursive-descent parser for the proto2 subset listed in the module docstring."""

    def __init__(self, name: str, text: str) -> None:
        self.toks = _tokenize(text)
        self.pos = 0
        self.file = descriptor_pb2.FileDescriptorProto(name=name, syntax="proto2")
        # (field proto, scope list, raw type name) to resolve once every type is known.
        self.unresolved: list[tuple[descriptor_pb2.FieldDescriptorProto, list[str], str]] = []

    def _next(self) -> str:
        if self.pos >= len(self.toks):
            raise SyntaxError(f"{self.file.name}: unexpected end of file")
        tok = self.toks[self.pos]
        self.pos += 1
        return tok

    def _expect(self, want: str) -> None:
        got = self._next()
        if got != want:
            raise SyntaxError(f"{self.file.name}: expected {want!r}, got {got!r}")

    def parse(self) -> descriptor_pb2.FileDescriptorProto:
        while self.pos < len(self.toks):
            tok = self._next()
            if tok == "syntax":
                self._expect("=")
                self._next()
                self._expect(";")
            elif tok == "package":
                self.file.package = self._next()
                self._expect(";")
            elif tok == "import":
                self.file.dependency.append(self._next().strip('"'))
                self._expect(";")
            elif tok == "message":
                self._message(self.file.message_type.add(), [self.file.package])
            elif tok == "enum":
                self._enum(self.file.enum_type.add())
            else:
                raise SyntaxError(f"{self.file.name}: unexpected {tok!r}")
        return self.file

    def _enum(self, enum: descriptor_pb2.EnumDescriptorProto) -> None:
        enum.name = self._next()
        self._expect("{")
        while (tok := self._next()) != "}":
            self._expect("=")
            enum.value.add(name=tok, number=int(self._next(), 0))
            self._expect(";")

    def _message(self, msg: descriptor_pb2.DescriptorProto, scope: list[str]) -> None:
        msg.name = self._next()
        inner = scope + [msg.name]
        self._expect("{")
        oneof_index = None
        while True:
            tok = self._next()
            if tok == "}":
                if oneof_index is None:
                    break
                oneof_index = None
                continue
            if tok == ";":
                continue
            if tok == "message":
                self._message(msg.nested_type.add(), inner)
            elif tok == "enum":
                self._enum(msg.enum_type.add())
            elif tok == "oneof":
                msg.oneof_decl.add(name=self._next())
                oneof_index = len(msg.oneof_decl) - 1
                self._expect("{")
            elif tok == "map":
                self._map_field(msg, inner)
            else:
                label = "optional" if oneof_index is not None else tok
                type_name = tok if oneof_index is not None else self._next()
                field = self._field(msg, inner, label, type_name)
                if oneof_index is not None:
                    field.oneof_index = oneof_index

    def _field(self, msg, scope, label, type_name):
        if label not in _LABELS:
            raise SyntaxError(f"{self.file.name}: unknown label {label!r} in {msg.name}")
        field = msg.field.add(name=self._next(), label=_LABELS[label])
        self._expect("=")
        field.number = int(self._next())
        field.json_name = _camel(field.name, upper=False)
        tok = self._next()
        if tok == "[":
            opt = self._next()
            self._expect("=")
            val = self._next()
            if opt != "packed":
                raise SyntaxError(f"{self.file.name}: unsupported option {opt!r}")
            field.options.packed = val == "true"
            self._expect("]")
            tok = self._next()
        if tok != ";":
            raise SyntaxError(f"{self.file.name}: expected ';' after field {field.name}")
        self._set_type(field, scope, type_name)
        return field

    def _map_field(self, msg, scope) -> None:
        self._expect("<")
        key_type = self._next()
        self._expect(",")
        value_type = self._next()
        self._expect(">")
        name = self._next()
        self._expect("=")
        number = int(self._next())
        self._expect(";")
        entry = msg.nested_type.add(name=_camel(name) + "Entry")
        entry.options.map_entry = True
        for fname, fnum, ftype in (("key", 1, key_type), ("value", 2, value_type)):
            f = entry.field.add(name=fname, number=fnum, label=_F.LABEL_OPTIONAL, json_name=fname)
            self._set_type(f, scope + [entry.name], ftype)
        field = msg.field.add(name=name, number=number, label=_F.LABEL_REPEATED, json_name=_camel(name, upper=False))
        field.type = _F.TYPE_MESSAGE
        field.type_name = "." + ".".join(scope + [entry.name])

    def _set_type(self, field, scope, type_name) -> None:
        if type_name in _SCALAR_TYPES:
            field.type = _SCALAR_TYPES[type_name]
        else:
            self.unresolved.append((field, scope, type_name))


def _camel(name: str, upper: bool = True) -> str:
    parts = name.split("_")
    out = "".join(p[:1].upper() + p[1:] for p in parts)
    return out if upper else out[:1].lower() + out[1:]


def _collect_types(file: descriptor_pb2.FileDescriptorProto) -> dict[str, str]:
    """Map every fully qualified message/enum name of a file to 'message' or 'enum'."""
    kinds: dict[str, str] = {}

    def walk(msgs, enums, prefix):
        for e in enums:
            kinds[f"{prefix}.{e.name}"] = "enum"
        for m in msgs:
            kinds[f"{prefix}.{m.name}"] = "message"
            walk(m.nested_type, m.enum_type, f"{prefix}.{m.name}")

    walk(file.message_type, file.enum_type, file.package)
    return kinds


def _build_pool() -> descriptor_pool.DescriptorPool:
    parsers = [_Parser(name, (PROTO_DIR / name).read_text(encoding="utf-8")) for name in _FILES]
    files = [p.parse() for p in parsers]
    kinds: dict[str, str] = {}
    for f in files:
        kinds.update(_collect_types(f))
    for parser in parsers:
        for field, scope, raw in parser.unresolved:
            # Protobuf's scoping rule: search from the innermost scope outwards.
            for depth in range(len(scope), -1, -1):
                candidate = ".".join(scope[:depth] + [raw])
                if candidate in kinds:
                    break
            else:
                raise SyntaxError(f"{parser.file.name}: unknown type {raw!r} for field {field.name}")
            field.type_name = "." + candidate
            field.type = _F.TYPE_MESSAGE if kinds[candidate] == "message" else _F.TYPE_ENUM
    pool = descriptor_pool.DescriptorPool()
    for f in files:
        pool.Add(f)
    return pool


POOL = _build_pool()


def message_class(name: str) -> Any:
    """Return the generated message class for a name relative to ``mindspore.irpb``.

    Typed ``Any``: the classes are made at run time from the ``.proto`` files, so no stub
    knows their fields."""
    return message_factory.GetMessageClass(POOL.FindMessageTypeByName(f"{PACKAGE}.{name}"))


# The message classes (``collector.proto`` re-exports them).
MESSAGES = [
    "Event", "Summary", "LossLandscape", "Explain",
    "TensorProto", "GraphProto", "NodeProto", "InputProto", "ParameterProto", "OutputProto",
    "AttributeProto", "NamedValueProto", "ValueProto", "TypeProto", "TensorShapeProto",
    "ModelProto", "OperatorProto", "OperatorSetProto",
    "LineageEvent", "TrainLineage", "EvaluationLineage", "DatasetGraph", "Operation",
    "OperationParameter", "StrList", "UserDefinedInfo",
]

Event = message_class("Event")
Summary = message_class("Summary")
LossLandscape = message_class("LossLandscape")
Explain = message_class("Explain")
TensorProto = message_class("TensorProto")
GraphProto = message_class("GraphProto")
NodeProto = message_class("NodeProto")
InputProto = message_class("InputProto")
ParameterProto = message_class("ParameterProto")
OutputProto = message_class("OutputProto")
AttributeProto = message_class("AttributeProto")
NamedValueProto = message_class("NamedValueProto")
ValueProto = message_class("ValueProto")
TypeProto = message_class("TypeProto")
TensorShapeProto = message_class("TensorShapeProto")
ModelProto = message_class("ModelProto")
OperatorProto = message_class("OperatorProto")
OperatorSetProto = message_class("OperatorSetProto")
LineageEvent = message_class("LineageEvent")
TrainLineage = message_class("TrainLineage")
EvaluationLineage = message_class("EvaluationLineage")
DatasetGraph = message_class("DatasetGraph")
Operation = message_class("Operation")
OperationParameter = message_class("OperationParameter")
StrList = message_class("StrList")
UserDefinedInfo = message_class("UserDefinedInfo")

#: name -> number of the ``DataType`` enum (``DataType["DT_FLOAT32"] == 11``).
DataType = {v.name: v.number for v in POOL.FindEnumTypeByName(f"{PACKAGE}.DataType").values}
globals().update(DataType)  # DT_FLOAT32 etc. as module constants

__all__ += [*MESSAGES, "DataType", *DataType]

if TYPE_CHECKING:
    # For type checkers: the DT_* constants are set from the enum at run time.
    def __getattr__(name: str) -> Any: ...
