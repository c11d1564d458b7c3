"""Generate one Python module per AMQP version from the XML specs in spec/.

Run ``python -m txamqp09.wire.codegen`` from a checkout to rewrite
``txamqp09/wire/_amqp0_8.py``, ``_amqp0_9.py`` and ``_amqp0_9_1.py``, and
``methods.py``, the version-independent method types handlers are annotated
with; ``--check`` only reports whether they differ from a fresh generation.

Each version is described by a structural spec (the stripped XML), optional
overlay files that add methods or documentation, and documentation sources
(the full XML of a specification) whose ``<doc>`` texts become docstrings.
0-8 has no full XML here; its methods take their text from 0-9's, which
carries 0-8's text forward, and an overlay documents what 0-9 dropped.
"""

from __future__ import annotations

import argparse
import keyword
import re
import struct
import sys
import textwrap
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator, Optional

__all__ = [
    "VERSIONS", "Spec", "load_spec", "parse_spec", "generate", "generate_methods", "render_all", "main",
]

#: The AMQP types whose encoding is fixed-size, with their struct letters.
FIXED = {"octet": "B", "short": "H", "long": "I", "longlong": "Q"}

PY_TYPES = {
    "bit": "bool",
    "octet": "int",
    "short": "int",
    "long": "int",
    "longlong": "int",
    "shortstr": "str",
    "longstr": "bytes",
    "table": "dict[str, Any]",
    "timestamp": "datetime",
    "content": "_f.Content",
}

DEFAULTS = {
    "bit": "False",
    "octet": "0",
    "short": "0",
    "long": "0",
    "longlong": "0",
    "shortstr": '""',
    "longstr": 'b""',
    "table": "None",
    "timestamp": "_EPOCH",
    "content": "None",
}

#: Defaults that make a method usable as it stands, by (class, method, field).
SPECIAL_DEFAULTS = {
    ("connection", "start", "mechanisms"): 'b"PLAIN"',
    ("connection", "start", "locales"): 'b"en_US"',
    ("connection", "start-ok", "mechanism"): '"PLAIN"',
    ("connection", "start-ok", "locale"): '"en_US"',
    ("connection", "open", "virtual-host"): '"/"',
}

#: How many property flags one 16-bit word carries (bit 0 is continuation).
FLAGS_PER_WORD = 15


@dataclass(frozen=True)
class VersionSources:
    """Where the generator reads one protocol version from."""

    module: str
    structure: str
    overlays: tuple[str, ...]
    docs: tuple[str, ...]
    tables: str
    #: A spec whose field names replace this one's ``reserved`` names.
    names_from: Optional[str] = None
    #: The docs are this very version's full specification, so a method
    #: they mark synchronous, or give a response, is so here too (the
    #: stripped 0-9-1 XML lost basic.recover's ``synchronous`` flag and its
    #: recover-ok response).
    docs_complete_structure: bool = False


VERSIONS: dict[str, VersionSources] = {
    "0-8": VersionSources(
        "_amqp0_8", "amqp0-8.xml", ("amqp0-8-docs.xml",), ("amqp0-9.full.xml",), "RABBITMQ"
    ),
    "0-9": VersionSources("_amqp0_9", "amqp0-9.xml", (), ("amqp0-9.full.xml",), "AMQP0_9"),
    "0-9-1": VersionSources(
        "_amqp0_9_1",
        "amqp0-9-1-rabbitmq.xml",
        ("amqp0-9-1-rabbitmq-overlay.xml",),
        ("amqp0-9-1.full.xml",),
        "RABBITMQ",
        names_from="amqp0-9.xml",
        docs_complete_structure=True,
    ),
}


# -- the parsed spec ---------------------------------------------------------


@dataclass
class Field:
    """A method field or a content property."""

    name: str
    type: str
    domain: str = ""
    #: The spec's ``reserved-N`` name of a field renamed after an earlier spec.
    reserved: str = ""

    @property
    def attr(self) -> str:
        """The Python attribute name."""
        name = self.name.replace("-", "_")
        return name + "_" if keyword.iskeyword(name) else name


@dataclass
class MethodSpec:
    """One method of an AMQP class."""

    klass: str
    name: str
    index: int
    synchronous: bool
    content: bool
    responses: list[str]
    chassis: list[str]
    fields: list[Field]
    label: str = ""
    doc: str = ""
    field_docs: dict[str, str] = field(default_factory=dict)

    @property
    def handler(self) -> str:
        """The name of the Python method that handles this one: ``queue.declare``
        -> ``queue_declare``, ``basic.get-ok`` -> ``basic_get_ok``."""
        return f"{self.klass}_{self.name}".replace("-", "_")

    @property
    def pyname(self) -> str:
        """The generated class's name, e.g. ``BasicGetOk``."""
        return camel(self.klass) + camel(self.name)


@dataclass
class ClassSpec:
    """One AMQP class, with its content properties."""

    name: str
    index: int
    properties: list[Field]
    methods: list[MethodSpec]
    label: str = ""
    doc: str = ""
    property_docs: dict[str, str] = field(default_factory=dict)


@dataclass
class Constant:
    """A spec constant; *error* is "soft", "hard" or None."""

    name: str
    value: int
    error: Optional[str]


@dataclass
class Spec:
    """Everything the generator needs to know about one version."""

    version: str
    major: int
    minor: int
    revision: int
    constants: list[Constant]
    classes: list[ClassSpec]
    sources: list[str]


def camel(name: str) -> str:
    """``get-ok`` -> ``GetOk``."""
    return "".join(part.capitalize() for part in re.split(r"[- ]", name))


def _norm(name: str) -> str:
    return name.strip().replace(" ", "-")


def _flag(element: ET.Element, attribute: str) -> bool:
    return element.get(attribute, "0").strip() == "1"


def _domains(root: ET.Element) -> dict[str, str]:
    return {
        _norm(d.get("name", "")): _norm(d.get("type", "")) for d in root.iter("domain")
    }


#: Field names unified across versions: 0-9-1 spells "nowait" "no-wait".
FIELD_ALIASES = {"no-wait": "nowait"}


def _field(element: ET.Element, domains: dict[str, str]) -> Field:
    name = _norm(element.get("name", ""))
    name = FIELD_ALIASES.get(name, name)
    declared = _norm(element.get("type") or element.get("domain") or "")
    primitive = declared
    seen: set[str] = set()
    while primitive in domains and domains[primitive] != primitive:
        if primitive in seen:
            raise ValueError(f"domain loop at {primitive}")
        seen.add(primitive)
        primitive = domains[primitive]
    if primitive == "content" or declared == "content":
        primitive = "content"
    if primitive not in PY_TYPES:
        raise ValueError(f"field {name}: unknown type {declared!r}")
    return Field(name, primitive, declared)


def _method(klass: str, element: ET.Element, domains: dict[str, str]) -> MethodSpec:
    return MethodSpec(
        klass=klass,
        name=_norm(element.get("name", "")),
        index=int(element.get("index", "0")),
        synchronous=_flag(element, "synchronous"),
        content=_flag(element, "content"),
        responses=[_norm(r.get("name", "")) for r in element.findall("response")],
        chassis=[c.get("name", "") for c in element.findall("chassis")],
        fields=[_field(f, domains) for f in element.findall("field")],
    )


def _merge(root: ET.Element, overlay: ET.Element) -> None:
    """Add an overlay's domains, classes and methods to *root* in place."""
    classes = {_norm(c.get("name", "")): c for c in root.findall("class")}
    for domain in overlay.findall("domain"):
        root.append(domain)
    for klass in overlay.findall("class"):
        target = classes.get(_norm(klass.get("name", "")))
        if target is None:
            root.append(klass)
            continue
        methods = {_norm(m.get("name", "")) for m in target.findall("method")}
        for method in klass.findall("method"):
            if _norm(method.get("name", "")) not in methods and method.get("index"):
                target.append(method)


def _doc_text(element: Optional[ET.Element]) -> str:
    """The text of the ``<doc>`` children of *element*, as paragraphs."""
    if element is None:
        return ""
    paragraphs = []
    for doc in element.findall("doc"):
        if doc.get("type") in ("grammar", "scenario"):
            continue
        text = textwrap.dedent(doc.text or "").strip()
        for paragraph in re.split(r"\n\s*\n", text):
            words = " ".join(paragraph.split())
            if words:
                paragraphs.append(words)
    return "\n\n".join(paragraphs)


class _DocIndex:
    """Labels and doc texts from documentation XML, by class/method/field."""

    def __init__(self, roots: Iterable[ET.Element]) -> None:
        self.entries: dict[tuple[str, ...], tuple[str, str]] = {}
        for root in roots:
            for domain in root.findall("domain"):
                self._add(("", "", _norm(domain.get("name", ""))), domain)
            for klass in root.findall("class"):
                cname = _norm(klass.get("name", ""))
                self._add((cname,), klass)
                for prop in klass.findall("field"):
                    self._add((cname, "", _norm(prop.get("name", ""))), prop)
                for method in klass.findall("method"):
                    mname = _norm(method.get("name", ""))
                    self._add((cname, mname), method)
                    for fld in method.findall("field"):
                        self._add((cname, mname, _norm(fld.get("name", ""))), fld)

    def _add(self, key: tuple[str, ...], element: ET.Element) -> None:
        label = " ".join(element.get("label", "").split())
        text = _doc_text(element)
        if key not in self.entries and (label or text):
            self.entries[key] = (label, text)

    def get(self, *key: str) -> tuple[str, str]:
        return self.entries.get(key, ("", ""))

    def field(self, klass: str, method: str, fld: Field) -> str:
        """A field's description, from the field itself or else its domain."""
        if fld.reserved:
            return (
                f"Reserved ({fld.reserved} in this version's spec); named after "
                "the 0-9 field in this position. Leave it at its default."
            )
        label, text = self.get(klass, method, fld.name)
        if not (label or text):
            label, text = self.get("", "", fld.domain)
        return _describe(label, text)


def _describe(label: str, text: str) -> str:
    """One field's description from its label and doc text."""
    label = label[:1].upper() + label[1:] if label else ""
    return ". ".join(part.rstrip(".") for part in (label, text) if part) + "." if (label or text) else ""


def _rename_reserved(classes: list[ClassSpec], earlier: ET.Element) -> None:
    """Give reserved fields the name their position had in an earlier spec.

    0-9-1 renamed fields it no longer uses (the access ticket, insist,
    known-hosts ...) to ``reserved-N``; keeping 0-9's names lets code address
    a field by one name on every version.
    """
    domains = _domains(earlier)
    names: dict[tuple[str, str], list[Field]] = {}
    for klass in earlier.findall("class"):
        cname = _norm(klass.get("name", ""))
        names[(cname, "")] = [_field(f, domains) for f in klass.findall("field")]
        for method in klass.findall("method"):
            names[(cname, _norm(method.get("name", "")))] = [
                _field(f, domains) for f in method.findall("field")
            ]
    for k in classes:
        lists = [("", k.properties)] + [(m.name, m.fields) for m in k.methods]
        for mname, fields in lists:
            old = names.get((k.name, mname), [])
            for n, fld in enumerate(fields):
                if re.fullmatch(r"reserved(-\d+)?", fld.name) and n < len(old) and old[n].type == fld.type:
                    fld.reserved = fld.name
                    fld.name = old[n].name


def _complete_methods(classes: list[ClassSpec], full: ET.Element) -> None:
    """Add synchronous flags and responses that a full spec has and *classes* lack."""
    methods = {
        (_norm(k.get("name", "")), _norm(m.get("name", ""))): m
        for k in full.findall("class")
        for m in k.findall("method")
    }
    for klass in classes:
        for method in klass.methods:
            element = methods.get((klass.name, method.name))
            if element is None:
                continue
            method.synchronous = method.synchronous or _flag(element, "synchronous")
            for response in element.findall("response"):
                name = _norm(response.get("name", ""))
                if name not in method.responses:
                    method.responses.append(name)


def load_spec(spec_dir: Path, version: str) -> Spec:
    """Read one version's structure, overlays and documentation."""
    sources = VERSIONS[version]
    docs = [ET.parse(spec_dir / name).getroot() for name in sources.docs]
    return parse_spec(
        ET.parse(spec_dir / sources.structure).getroot(),
        version,
        overlays=[ET.parse(spec_dir / name).getroot() for name in sources.overlays],
        docs=docs,
        names_from=(
            ET.parse(spec_dir / sources.names_from).getroot() if sources.names_from else None
        ),
        complete_from=docs if sources.docs_complete_structure else (),
        sources=[sources.structure, *sources.overlays, *sources.docs],
    )


def parse_spec(
    root: ET.Element | str,
    version: str,
    *,
    overlays: Iterable[ET.Element] = (),
    docs: Iterable[ET.Element] = (),
    names_from: Optional[ET.Element] = None,
    complete_from: Iterable[ET.Element] = (),
    sources: Iterable[str] = (),
) -> Spec:
    """Build a :class:`Spec` from parsed XML (or the XML text of a structure).

    :param root: the ``<amqp>`` element of the structural spec, or its text;
        overlays are merged into it in place.
    :param overlays: elements whose extra domains, classes and methods are
        added, and whose ``<doc>`` texts are used before those of *docs*.
    :param docs: full specifications to take labels and doc texts from.
    :param names_from: an earlier spec whose field names replace this one's
        ``reserved`` names.
    :param complete_from: full specifications of this same version whose
        ``synchronous`` flags and ``<response>`` elements are added to the
        structure's methods where it lacks them.
    :param sources: file names to credit in the generated module's docstring.
    """
    if isinstance(root, str):
        root = ET.fromstring(root)
    overlays = list(overlays)
    for overlay in overlays:
        _merge(root, overlay)
    index = _DocIndex(overlays + list(docs))
    domains = _domains(root)
    constants = []
    for c in root.findall("constant"):
        kind = c.get("class", "").replace(" ", "-")
        error = {"soft-error": "soft", "hard-error": "hard"}.get(kind)
        constants.append(Constant(_norm(c.get("name", "")), int(c.get("value", "0")), error))
    classes = [
        ClassSpec(
            name=_norm(c.get("name", "")),
            index=int(c.get("index", "0")),
            properties=[_field(f, domains) for f in c.findall("field")],
            methods=[_method(_norm(c.get("name", "")), m, domains) for m in c.findall("method")],
        )
        for c in root.findall("class")
    ]
    if names_from is not None:
        _rename_reserved(classes, names_from)
    for full in complete_from:
        _complete_methods(classes, full)
    for klass in classes:
        klass.label, klass.doc = index.get(klass.name)
        for prop in klass.properties:
            klass.property_docs[prop.name] = index.field(klass.name, "", prop)
        for method in klass.methods:
            method.label, method.doc = index.get(klass.name, method.name)
            for fld in method.fields:
                method.field_docs[fld.name] = index.field(klass.name, method.name, fld)
    return Spec(
        version=version,
        major=int(root.get("major", "0")),
        minor=int(root.get("minor", "0")),
        revision=int(root.get("revision", "0")),
        constants=constants,
        classes=classes,
        sources=list(sources),
    )


# -- code emission -------------------------------------------------------------


class _Structs:
    """Precompiled struct formats used by a module, one per format.

    Generated code calls module-level aliases of their bound ``pack`` and
    ``unpack_from`` methods (``_pack_HHH``), saving an attribute lookup per
    field group on the hot path.
    """

    def __init__(self) -> None:
        self.used: set[tuple[str, str]] = set()

    def pack(self, fmt: str) -> str:
        """The name of the packing function for *fmt*."""
        self.used.add((fmt, "pack"))
        return f"_pack_{fmt}"

    def unpack(self, fmt: str) -> str:
        """The name of the ``unpack_from`` function for *fmt*."""
        self.used.add((fmt, "unpack_from"))
        return f"_unpack_{fmt}"

    def lines(self) -> list[str]:
        """Definitions of every struct and alias used."""
        out = []
        for fmt in sorted({fmt for fmt, _ in self.used}):
            out.append(f'_S_{fmt} = struct.Struct(">{fmt}")')
            for method, prefix in (("pack", "_pack"), ("unpack_from", "_unpack")):
                if (fmt, method) in self.used:
                    out.append(f"{prefix}_{fmt} = _S_{fmt}.{method}")
        return out


def _docstring(text: str, indent: str) -> list[str]:
    """A triple-quoted docstring, wrapped at 79 columns."""
    text = text.replace("\\", "\\\\").replace('"""', '\\"\\"\\"')
    out: list[str] = []
    for n, paragraph in enumerate(text.split("\n\n")):
        if n:
            out.append("")
        hang = "    " if paragraph.startswith(":") else ""
        out.extend(
            textwrap.wrap(paragraph, 79 - len(indent), subsequent_indent=hang, break_on_hyphens=False)
            or [""]
        )
    if len(out) == 1 and len(out[0]) + len(indent) + 6 <= 79:
        return [f'{indent}"""{out[0]}"""']
    lines = [f'{indent}"""{out[0]}'] + [f"{indent}{line}" if line else "" for line in out[1:]]
    return lines + [f'{indent}"""']


def _groups(fields: list[Field]) -> Iterator[tuple[str, list[Field]]]:
    """Split fields into runs: ("fixed", fields) with bits packed, or ("var", [field])."""
    run: list[Field] = []
    for fld in fields:
        if fld.type in FIXED or fld.type == "bit":
            run.append(fld)
        else:
            if run:
                yield "fixed", run
                run = []
            yield "var", [fld]
    if run:
        yield "fixed", run


def _bit_octets(run: list[Field]) -> list[tuple[Optional[Field], list[Field]]]:
    """Turn a fixed run into struct slots: (field, []) or (None, bits of one octet)."""
    slots: list[tuple[Optional[Field], list[Field]]] = []
    for fld in run:
        if fld.type == "bit":
            if slots and slots[-1][0] is None and len(slots[-1][1]) < 8:
                slots[-1][1].append(fld)
            else:
                slots.append((None, [fld]))
        else:
            slots.append((fld, []))
    return slots


def _slot_format(slots: list[tuple[Optional[Field], list[Field]]]) -> str:
    return "".join(FIXED[f.type] if f else "B" for f, _ in slots)


_ENCODERS = {
    "shortstr": "_f.encode_shortstr({})",
    "longstr": "_f.encode_longstr({})",
    "table": "_TABLES.encode_table({})",
    "timestamp": "_f.encode_timestamp({})",
    "content": "_f.encode_content({})",
}

_DECODERS = {
    "shortstr": "_f.decode_shortstr(buf, offset)",
    "longstr": "_f.decode_longstr(buf, offset)",
    "table": "_TABLES.decode_table(buf, offset)",
    "timestamp": "_f.decode_timestamp(buf, offset)",
    "content": "_f.decode_content(buf, offset)",
}


def _bits_expr(bits: list[Field], value: str = "self.{}") -> str:
    return " | ".join(
        f"({1 << n} if {value.format(b.attr)} else 0)" for n, b in enumerate(bits)
    )


def _encode_method(m: MethodSpec, klass_index: int, structs: _Structs) -> list[str]:
    parts: list[str] = []
    header_pending = True
    for kind, run in _groups(m.fields):
        if kind == "var":
            if header_pending:
                parts.append(repr(struct.pack(">HH", klass_index, m.index)))
                header_pending = False
            fld = run[0]
            parts.append(_ENCODERS[fld.type].format(f"self.{fld.attr}"))
            continue
        slots = _bit_octets(run)
        fmt = _slot_format(slots)
        args = [f"self.{f.attr}" if f else _bits_expr(bits) for f, bits in slots]
        if header_pending:
            fmt = "HH" + fmt
            args = [str(klass_index), str(m.index)] + args
            header_pending = False
        parts.append(f"{structs.pack(fmt)}({', '.join(args)})")
    if header_pending:
        parts.append(repr(struct.pack(">HH", klass_index, m.index)))
    body = ["    def encode(self) -> bytes:"]
    if len(parts) == 1:
        body.append(f"        return {parts[0]}")
    else:
        body.append("        return (")
        body.append(f"            {parts[0]}")
        body.extend(f"            + {p}" for p in parts[1:])
        body.append("        )")
    return body


def _decode_field(fld: Field, target: str, indent: str) -> list[str]:
    """Lines that decode one variable-size field at ``offset`` into *target*.

    Short strings, the commonest field, are decoded inline: a length octet,
    then UTF-8. A length running past the payload is caught by the end check
    every decoder finishes with, and invalid UTF-8 raises UnicodeDecodeError,
    which :func:`~txamqp09.wire.base.decode_method` maps to 502 like every
    other malformed field.
    """
    if fld.type == "shortstr":
        return [
            f"{indent}start = offset + 1",
            f"{indent}offset = start + buf[offset]",
            f"{indent}{target} = buf[start:offset].decode()",
        ]
    return [f"{indent}{target}, offset = {_DECODERS[fld.type]}"]


def _decode_fixed(
    slots: list[tuple[Optional[Field], list[Field]]], structs: _Structs, indent: str
) -> list[str]:
    """Lines that decode a run of fixed-size fields and bit octets into ``self``.

    Each bit octet is read into a local ``bitsN`` (N its slot in the run) and
    its bits are then stored as booleans.
    """
    fmt = _slot_format(slots)
    targets = [f"self.{f.attr}" if f is not None else f"bits{n}" for n, (f, _) in enumerate(slots)]
    if fmt == "B":
        lines = [f"{indent}{targets[0]} = buf[offset]"]
    else:
        target = f"({targets[0]},)" if len(targets) == 1 else ", ".join(targets)
        lines = [f"{indent}{target} = {structs.unpack(fmt)}(buf, offset)"]
    for n, (_, bits) in enumerate(slots):
        for bit, b in enumerate(bits):
            lines.append(f"{indent}self.{b.attr} = (bits{n} & {1 << bit}) != 0")
    lines.append(f"{indent}offset += {struct.calcsize('>' + fmt)}")
    return lines


_END_CHECK = [
    "        if offset != len(buf):",
    "            _f.check_end(buf, offset)",
]


def _decode_method(m: MethodSpec, structs: _Structs) -> list[str]:
    body = [
        "    @classmethod",
        f"    def decode(cls, buf: bytes, offset: int) -> {m.pyname}:",
        "        self = _new(cls)",
    ]
    for kind, run in _groups(m.fields):
        if kind == "var":
            body += _decode_field(run[0], f"self.{run[0].attr}", "        ")
        else:
            body += _decode_fixed(_bit_octets(run), structs, "        ")
    body += _END_CHECK
    body.append("        return self")
    return body


def _init(fields: list[Field], defaults: dict[str, str], optional: bool) -> list[str]:
    if not fields:
        return []
    params = []
    for f in fields:
        annotation = PY_TYPES[f.type]
        default = defaults.get(f.name, DEFAULTS[f.type])
        if optional:
            annotation, default = f"Optional[{annotation}]", "None"
        elif default == "None":
            annotation = f"Optional[{annotation}]"
        params.append(f"        {f.attr}: {annotation} = {default},")
    lines = ["    def __init__(", "        self,", *params, "    ) -> None:"]
    for f in fields:
        value = f.attr
        if not optional and f.type == "table":
            value = f"{{}} if {f.attr} is None else {f.attr}"
        elif not optional and f.type == "content":
            value = f"_f.Content() if {f.attr} is None else {f.attr}"
        lines.append(f"        self.{f.attr} = {value}")
    return lines


def _method_class(
    spec: Spec, k: ClassSpec, m: MethodSpec, structs: _Structs
) -> list[str]:
    summary = (m.label[:1].upper() + m.label[1:]).rstrip(".") + "." if m.label else f"{k.name}.{m.name}."
    doc = [summary]
    if m.doc:
        doc.append(m.doc)
    for f in m.fields:
        doc.append(f":ivar {f.attr}: ({f.type}) {m.field_docs.get(f.name, '')}".rstrip())
    special = {
        **SPECIAL_DEFAULTS,
        ("connection", "start", "version-major"): str(spec.major),
        ("connection", "start", "version-minor"): str(spec.minor),
    }
    defaults = {
        fname: value
        for (cname, mname, fname), value in special.items()
        if (cname, mname) == (k.name, m.name)
    }
    lines = [f"class {m.pyname}(Method):"]
    lines += _docstring("\n\n".join(doc), "    ")
    lines += [
        "",
        f"    __slots__ = ({''.join(repr(f.attr) + ', ' for f in m.fields)})",
        f'    NAME = "{k.name}.{m.name}"',
        f"    CLASS_ID = {k.index}",
        f"    METHOD_ID = {m.index}",
        f"    SYNCHRONOUS = {m.synchronous}",
        f"    CONTENT = {m.content}",
        f"    CHASSIS = ({''.join(repr(c) + ', ' for c in m.chassis)})",
        f'    HANDLER = "{m.handler}"',
        f"    FIELDS = ({''.join(f'({f.attr!r}, {f.type!r}), ' for f in m.fields)})",
        "",
    ]
    init = _init(m.fields, defaults, optional=False)
    if init:
        lines += init + [""]
    lines += _encode_method(m, k.index, structs) + [""]
    lines += _decode_method(m, structs)
    return lines


def _flag_mask(n: int) -> int:
    return (1 << (15 - n % FLAGS_PER_WORD)) << (16 * (n // FLAGS_PER_WORD))


def _properties_class(k: ClassSpec, structs: _Structs) -> list[str]:
    name = f"{camel(k.name)}Properties"
    doc = [f"Content properties of the {k.name} class; a property left None is not sent."]
    for f in k.properties:
        doc.append(f":ivar {f.attr}: ({f.type}) {k.property_docs.get(f.name, '')}".rstrip())
    words = (len(k.properties) + FLAGS_PER_WORD - 1) // FLAGS_PER_WORD
    known = 0
    for n in range(len(k.properties)):
        known |= _flag_mask(n)
    lines = [f"class {name}(Properties):"]
    lines += _docstring("\n\n".join(doc), "    ")
    lines += [
        "",
        f"    __slots__ = ({''.join(repr(f.attr) + ', ' for f in k.properties)})",
        f'    NAME = "{k.name} properties"',
        f"    CLASS_ID = {k.index}",
        f"    FIELDS = ({''.join(f'({f.attr!r}, {f.type!r}), ' for f in k.properties)})",
        "",
    ]
    lines += _init(k.properties, {}, optional=True)
    lines += ["", "    def encode(self) -> bytes:", "        flags = 0", "        parts = []"]
    for n, f in enumerate(k.properties):
        if f.type == "bit":
            raise ValueError(f"{k.name}: bit properties are not supported")
        if f.type in FIXED:
            encoded = f"{structs.pack(FIXED[f.type])}(self.{f.attr})"
        else:
            encoded = _ENCODERS[f.type].format(f"self.{f.attr}")
        lines += [
            f"        if self.{f.attr} is not None:",
            f"            flags |= {_flag_mask(n):#x}",
            f"            parts.append({encoded})",
        ]
    if words == 1:
        lines.append(f'        return {structs.pack("H")}(flags) + b"".join(parts)')
    else:
        lines.append('        return _f.encode_property_flags(flags) + b"".join(parts)')
    lines += [
        "",
        "    @classmethod",
        f"    def decode(cls, buf: bytes, offset: int) -> {name}:",
    ]
    if words == 1:
        lines += [
            "        flags = (buf[offset] << 8) | buf[offset + 1]",
            "        offset += 2",
        ]
    else:
        lines.append(f"        flags, offset = _f.decode_property_flags(buf, offset, {words})")
    lines += [
        f"        if flags & ~{known:#x}:",
        f"            raise _f.property_flags_error(cls.NAME, flags, {words})",
        "        self = _new(cls)",
    ]
    # Properties are tested in groups: a message sets few of them, so most
    # groups are passed over with one test and set to None in one statement.
    numbered = list(enumerate(k.properties))
    for first in range(0, len(numbered), PROPERTY_GROUP):
        group = numbered[first : first + PROPERTY_GROUP]
        mask = 0
        for n, _ in group:
            mask |= _flag_mask(n)
        lines.append(f"        if flags & {mask:#x}:")
        for n, f in group:
            lines.append(f"            if flags & {_flag_mask(n):#x}:")
            lines += _decode_property(f, structs, "                ")
            lines += ["            else:", f"                self.{f.attr} = None"]
        lines.append("        else:")
        lines.append("            " + " = ".join(f"self.{f.attr}" for _, f in group) + " = None")
    lines += _END_CHECK + ["        return self"]
    return lines


#: Content properties tested together by generated decoders.
PROPERTY_GROUP = 4


def _decode_property(f: Field, structs: _Structs, indent: str) -> list[str]:
    """Lines that decode one property at ``offset`` into ``self``."""
    if f.type == "octet":
        return [f"{indent}self.{f.attr} = buf[offset]", f"{indent}offset += 1"]
    if f.type in FIXED:
        fmt = FIXED[f.type]
        return [
            f"{indent}(self.{f.attr},) = {structs.unpack(fmt)}(buf, offset)",
            f"{indent}offset += {struct.calcsize('>' + fmt)}",
        ]
    return _decode_field(f, f"self.{f.attr}", indent)


def _namespace_class(k: ClassSpec) -> list[str]:
    summary = (k.label[:1].upper() + k.label[1:]).rstrip(".") + "." if k.label else f"The {k.name} class."
    doc = summary + ("\n\n" + k.doc if k.doc else "")
    lines = [f"class {camel(k.name)}(AMQPClass):"]
    lines += _docstring(doc, "    ")
    lines += ["", f'    NAME = "{k.name}"', f"    CLASS_ID = {k.index}"]
    for m in k.methods:
        lines.append(f"    {camel(m.name)} = {m.pyname}")
    methods = "".join(f"{m.pyname}, " for m in k.methods)
    lines.append(f"    METHODS = ({methods})")
    if k.properties:
        lines.append(f"    Properties = {camel(k.name)}Properties")
    return lines


def generate(spec: Spec, tables: str) -> str:
    """The source of the module for *spec*."""
    structs = _Structs()
    version = spec.version
    body: list[str] = []
    body.append("# -- constants " + "-" * 64)
    body.append("")
    for c in spec.constants:
        body.append(f"{c.name.replace('-', '_').upper()} = {c.value}")
    body.append("")
    body.append("#: Reply codes: code -> (name, hard). Hard errors close the connection.")
    body.append("REPLY_CODES: dict[int, ReplyCode] = {")
    for c in spec.constants:
        if c.error:
            body.append(f'    {c.value}: ReplyCode("{c.name}", {c.value}, {c.error == "hard"}),')
    body.append("}")
    for k in spec.classes:
        body += ["", "", f"# -- {k.name} " + "-" * (72 - len(k.name))]
        if k.properties:
            body += ["", ""] + _properties_class(k, structs)
        for m in k.methods:
            body += ["", ""] + _method_class(spec, k, m, structs)
    body += ["", "", "# -- tables " + "-" * 66, ""]
    for k in spec.classes:
        for m in k.methods:
            if m.responses:
                names = "".join(f"{camel(k.name) + camel(r)}, " for r in m.responses)
                body.append(f"{m.pyname}.RESPONSES = ({names})")
    for k in spec.classes:
        body += ["", ""] + _namespace_class(k)
    body += [
        "",
        "",
        "#: Every AMQP class of this version, in spec order.",
        f"CLASSES: tuple[type[AMQPClass], ...] = ({''.join(camel(k.name) + ', ' for k in spec.classes)})",
        "",
        "#: Method classes by method_index(class id, method id).",
        "METHODS: dict[int, type[Method]] = {",
    ]
    for k in spec.classes:
        for m in k.methods:
            body.append(f"    {(k.index << 16) | m.index:#x}: {m.pyname},")
    body += [
        "}",
        "",
        '#: Method classes by "class.method" name.',
        "BY_NAME: dict[str, type[Method]] = {cls.NAME: cls for cls in METHODS.values()}",
        "",
        "#: Content property classes by class id.",
        "PROPERTIES: dict[int, type[Properties]] = {",
    ]
    for k in spec.classes:
        if k.properties:
            body.append(f"    {k.index}: {camel(k.name)}Properties,")
    body += ["}", ""]
    revision = f", {spec.revision}" if spec.revision else ""
    header = [
        f'"""AMQP {version}: constants, methods and content properties.',
        "",
        "Generated by ``python -m txamqp09.wire.codegen`` from "
        + (", ".join(f"spec/{s}" for s in spec.sources) or "an XML specification")
        + ". Do not edit: change the generator or the spec and regenerate.",
        '"""',
        "",
        "# fmt: off",
        "# ruff: noqa: E501",
        "from __future__ import annotations",
        "",
        "import struct",
        "from datetime import datetime, timezone",
        "from typing import Any, Optional",
        "",
        "from txamqp09.wire import fields as _f",
        "from txamqp09.wire.base import AMQPClass, Method, Properties, ReplyCode",
        "",
        f'VERSION = "{version}"',
        f"VERSION_TUPLE = ({spec.major}, {spec.minor}{revision})",
        f"_TABLES = _f.{tables}",
        "#: The table dialect of this version; see :mod:`txamqp09.wire.fields`.",
        "TABLES = _TABLES",
        "_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)",
        "#: Makes an instance without __init__: decoders set every field themselves.",
        "_new = object.__new__",
        "",
        *structs.lines(),
        "",
    ]
    return "\n".join(header + body)


def _method_versions(specs: list[Spec]) -> dict[str, dict[str, MethodSpec]]:
    """Every method's spec in each version that has it, by class name, in
    first-seen spec order."""
    found: dict[str, dict[str, MethodSpec]] = {}
    for spec in specs:
        for k in spec.classes:
            for m in k.methods:
                found.setdefault(m.pyname, {})[spec.version] = m
    return found


def _method_protocol(name: str, versions: dict[str, MethodSpec]) -> list[str]:
    """One method's Protocol: the fields every version that has the method
    defines, read-only, typed as they are (a union where versions differ)."""
    first = next(iter(versions.values()))
    shared = [
        f for f in first.fields
        if all(any(g.attr == f.attr for g in m.fields) for m in versions.values())
    ]
    doc = [f"``{first.klass}.{first.name}`` of {', '.join(versions)}."]
    own = {
        f.attr: [v for v, m in versions.items() if any(g.attr == f.attr for g in m.fields)]
        for m in versions.values()
        for f in m.fields
        if f not in shared and all(f.attr != s.attr for s in shared)
    }
    if own:
        doc.append(
            "Fields only some versions define (read them with ``getattr`` and a default): "
            + "; ".join(f"``{attr}`` ({', '.join(vs)})" for attr, vs in own.items())
            + "."
        )
    lines = [f"class {name}(AnyMethod, Protocol):"]
    lines += _docstring("\n\n".join(doc), "    ")
    for f in shared:
        types = sorted({PY_TYPES[g.type] for m in versions.values() for g in m.fields if g.attr == f.attr})
        lines += ["", "    @property", f"    def {f.attr}(self) -> {' | '.join(types)}: ..."]
    return lines


def _constructor(name: str, versions: dict[str, MethodSpec]) -> list[str]:
    """The Spec member that builds method *name*: keyword arguments for the
    fields every version defining it has, returning a method of any version."""
    first = next(iter(versions.values()))
    shared = [
        f for f in first.fields
        if all(any(g.attr == f.attr and g.type == f.type for g in m.fields) for m in versions.values())
    ]
    params = []
    for f in shared:
        annotation = PY_TYPES[f.type]
        if DEFAULTS[f.type] == "None":
            annotation = f"Optional[{annotation}]"
        params.append(f"{f.attr}: {annotation} = ...")
    keywords = ", *, " + ", ".join(params) if params else ""
    return [f"    def {name}(self{keywords}) -> Method: ..."]


def _spec_protocol(specs: list[Spec], found: dict[str, dict[str, MethodSpec]]) -> list[str]:
    """The Protocol every generated module satisfies: its tables, and a
    constructor for each method all versions have."""
    lines = [
        "class Spec(Protocol):",
        '    """A generated version module as version-independent code sees it:',
        "    its tables, and the methods every version has (a method only some",
        '    versions have is found through ``BY_NAME``)."""',
        "",
        "    VERSION: str",
        "    METHODS: dict[int, type[Method]]",
        "    BY_NAME: dict[str, type[Method]]",
        "    PROPERTIES: dict[int, type[Properties]]",
        "    REPLY_CODES: dict[int, ReplyCode]",
    ]
    for name, versions in found.items():
        if len(versions) == len(specs):
            lines += [""] + _constructor(name, versions)
    return lines


def generate_methods(specs: list[Spec]) -> str:
    """The source of ``methods.py``: a Protocol per method, shared by every
    version, and (for mypy alone) the check that each version's class has it."""
    found = _method_versions(specs)
    body = [
        '"""Version-independent method types: one Protocol per AMQP method.',
        "",
        "A handler serves the same method of every version (0-8, 0-9, 0-9-1),",
        "whose generated classes are distinct; it is annotated with the Protocol",
        "of that method's name here, which offers the fields every version",
        "defining the method has, with their Python types, so mypy checks what",
        "the handler reads. Annotations only: nothing here runs per message.",
        "",
        "Generated by ``python -m txamqp09.wire.codegen`` from "
        + ", ".join(f"the {s.version}" for s in specs)
        + " specs. Do not edit: change the generator or the spec and regenerate.",
        '"""',
        "",
        "# fmt: off",
        "# ruff: noqa: E501",
        "from __future__ import annotations",
        "",
        "from datetime import datetime",
        "from typing import TYPE_CHECKING, Any, ClassVar, Optional, Protocol",
        "",
        "from txamqp09.wire import fields as _f",
        "",
        "if TYPE_CHECKING:",
        "    from txamqp09.wire.base import Method, Properties, ReplyCode",
        "",
        "",
        "class AnyMethod(Protocol):",
        '    """What a method of any version offers: the spec\'s metadata and its encoding."""',
        "",
        "    NAME: ClassVar[str]",
        "    CLASS_ID: ClassVar[int]",
        "    METHOD_ID: ClassVar[int]",
        "    HANDLER: ClassVar[str]",
        "",
        "    def encode(self) -> bytes:",
        '        """The method frame payload: class id, method id, fields."""',
    ]
    for name, versions in found.items():
        body += ["", ""] + _method_protocol(name, versions)
    body += ["", ""] + _spec_protocol(specs, found)
    body += ["", "", "if TYPE_CHECKING:"]
    body += [f"    from txamqp09.wire import {VERSIONS[s.version].module}" for s in specs]
    body += ["", "    # Each version module is a Spec and each of its classes has its"]
    body += ["    # method's Protocol (mypy checks these)."]
    body.append(f"    _SPECS: tuple[Spec, ...] = ({''.join(VERSIONS[s.version].module + ', ' for s in specs)})")
    for name, versions in found.items():
        classes = "".join(f"{VERSIONS[v].module}.{name}, " for v in versions)
        body.append(f"    _{name}: tuple[type[{name}], ...] = ({classes})")
    body.append("")
    return "\n".join(body)


def _package_dir() -> Path:
    return Path(__file__).resolve().parent


def default_spec_dir() -> Path:
    """spec/ at the top of the checkout this module lives in."""
    return _package_dir().parent.parent / "spec"


def render_all(spec_dir: Path) -> dict[Path, str]:
    """Generated source for every version, keyed by the file it belongs in."""
    out = {}
    specs = []
    for version, sources in VERSIONS.items():
        spec = load_spec(spec_dir, version)
        specs.append(spec)
        out[_package_dir() / f"{sources.module}.py"] = generate(spec, sources.tables)
    out[_package_dir() / "methods.py"] = generate_methods(specs)
    return out


def main(argv: Optional[list[str]] = None) -> int:
    """Regenerate the protocol modules, or with --check report stale ones."""
    parser = argparse.ArgumentParser(prog="python -m txamqp09.wire.codegen", description=main.__doc__)
    parser.add_argument("--spec-dir", type=Path, default=default_spec_dir())
    parser.add_argument("--check", action="store_true", help="only report modules that differ")
    args = parser.parse_args(argv)
    stale = []
    for path, source in render_all(args.spec_dir).items():
        current = path.read_text(encoding="utf-8") if path.exists() else None
        if current == source:
            continue
        stale.append(path)
        if not args.check:
            path.write_text(source, encoding="utf-8")
    for path in stale:
        print(("stale: " if args.check else "wrote: ") + str(path))
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
