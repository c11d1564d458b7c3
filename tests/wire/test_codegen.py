"""The generator and the modules it wrote: fresh, complete, documented, exact.

The expectations here are read from the XML files directly, with
:mod:`xml.etree.ElementTree` and none of the generator's code, so that a bug
in the generator cannot hide itself.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
import inspect
import io
import keyword
import sys
import tempfile
import xml.etree.ElementTree as ET
from contextlib import redirect_stdout
from pathlib import Path
from types import ModuleType
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from twisted.trial.unittest import SynchronousTestCase

from tests.wire import strategies as s
from txamqp09.wire import _amqp0_8, _amqp0_9, _amqp0_9_1, codegen, fields, methods
from txamqp09.wire.base import AMQPClass, decode_properties, method_index
from txamqp09.wire.errors import AMQPSyntaxError

SPEC_DIR = codegen.default_spec_dir()

#: version -> (module, structure XML, overlay XMLs) it is generated from.
MODULES: dict[str, tuple[ModuleType, str, tuple[str, ...]]] = {
    "0-8": (_amqp0_8, "amqp0-8.xml", ()),
    "0-9": (_amqp0_9, "amqp0-9.xml", ()),
    "0-9-1": (_amqp0_9_1, "amqp0-9-1-rabbitmq.xml", ("amqp0-9-1-rabbitmq-overlay.xml",)),
}
#: version -> its own full specification, which adds synchronous flags and
#: responses the stripped XML lost (0-9-1's basic.recover).
FULL = {"0-9-1": "amqp0-9-1.full.xml"}


def _norm(name: str) -> str:
    return " ".join(name.split()).replace(" ", "-")


def _camel(name: str) -> str:
    return "".join(part.capitalize() for part in _norm(name).split("-"))


class _XMLSpec:
    """What one spec file declares, read with ElementTree alone."""

    def __init__(self, *paths: Path, full: Path | None = None) -> None:
        roots = [ET.parse(path).getroot() for path in paths]
        self.domains: dict[str, str] = {}
        self.classes: dict[str, tuple[int, list[ET.Element]]] = {}
        self.methods: dict[tuple[str, str], ET.Element] = {}
        self.constants: list[ET.Element] = []
        for root in roots:
            self.constants += root.findall("constant")
            for domain in root.findall("domain"):
                self.domains[_norm(domain.get("name", ""))] = _norm(domain.get("type", ""))
            for klass in root.findall("class"):
                cname = _norm(klass.get("name", ""))
                if klass.get("index"):
                    self.classes[cname] = (int(klass.get("index", "")), klass.findall("field"))
                for method in klass.findall("method"):
                    key = (cname, _norm(method.get("name", "")))
                    if method.get("index") and key not in self.methods:
                        self.methods[key] = method
        self.synchronous = {k: m.get("synchronous") == "1" for k, m in self.methods.items()}
        self.responses = {
            k: {_norm(r.get("name", "")) for r in m.findall("response")}
            for k, m in self.methods.items()
        }
        if full is not None:
            for klass in ET.parse(full).getroot().findall("class"):
                for method in klass.findall("method"):
                    key = (_norm(klass.get("name", "")), _norm(method.get("name", "")))
                    if key in self.methods:
                        self.synchronous[key] |= method.get("synchronous") == "1"
                        self.responses[key] |= {
                            _norm(r.get("name", "")) for r in method.findall("response")
                        }

    def primitive(self, field: ET.Element) -> str:
        """The primitive type of a field, following domains."""
        name = _norm(field.get("domain") or field.get("type") or "")
        while self.domains.get(name, name) != name:
            name = self.domains[name]
        return name


class FreshnessTests(SynchronousTestCase):
    """The checked-in modules are exactly what the generator writes today."""

    def test_modules_equal_fresh_generation(self) -> None:
        rendered = codegen.render_all(SPEC_DIR)
        self.assertEqual(len(rendered), 4)
        for path, source in rendered.items():
            self.assertEqual(
                path.read_text(encoding="utf-8"),
                source,
                f"{path.name} is stale: run python -m txamqp09.wire.codegen",
            )

    def test_check_mode(self) -> None:
        """``--check`` reports nothing stale and exits 0."""
        out = io.StringIO()
        with redirect_stdout(out):
            self.assertEqual(codegen.main(["--check", "--spec-dir", str(SPEC_DIR)]), 0)
        self.assertEqual(out.getvalue(), "")

    def test_check_mode_notices_stale_module(self) -> None:
        """``--check`` exits 1 against a spec that differs from the modules."""
        with tempfile.TemporaryDirectory() as tmp:
            for name in SPEC_DIR.iterdir():
                (Path(tmp) / name.name).write_bytes(name.read_bytes())
            spec = Path(tmp) / "amqp0-9.xml"
            spec.write_text(
                spec.read_text(encoding="utf-8").replace(
                    '<method name="ping"', '<method name="pinged"'
                ),
                encoding="utf-8",
            )
            out = io.StringIO()
            with redirect_stdout(out):
                self.assertEqual(codegen.main(["--check", "--spec-dir", tmp]), 1)
        self.assertIn("_amqp0_9.py", out.getvalue())
        self.assertNotIn("_amqp0_8.py", out.getvalue())

    def test_no_exec_or_eval(self) -> None:
        """Generated code is plain definitions: no exec, eval or compile."""
        for module, _, _ in MODULES.values():
            assert module.__file__ is not None
            tree = ast.parse(Path(module.__file__).read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                    self.assertNotIn(
                        node.func.id, {"exec", "eval", "compile", "__import__"}, module.__name__
                    )
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    names = [a.name for a in node.names]
                    self.assertFalse({"importlib", "builtins"} & set(names), names)


class CompletenessTests(SynchronousTestCase):
    """Every class and method of every spec is generated, with documentation."""

    def test_every_class_and_method(self) -> None:
        for version, (module, structure, overlays) in MODULES.items():
            full = SPEC_DIR / FULL[version] if version in FULL else None
            xml = _XMLSpec(SPEC_DIR / structure, *(SPEC_DIR / o for o in overlays), full=full)
            classes = {k.NAME: k for k in module.CLASSES}
            self.assertEqual(set(classes), set(xml.classes), version)
            for cname, (index, props) in xml.classes.items():
                namespace = classes[cname]
                self.assertTrue(issubclass(namespace, AMQPClass))
                self.assertEqual(namespace.CLASS_ID, index, (version, cname))
                self.assertIs(getattr(module, _camel(cname)), namespace)
                self.assertTrue((namespace.__doc__ or "").strip(), (version, cname))
                if props:
                    assert namespace.Properties is not None, (version, cname)
                    self.assertEqual(
                        [kind for _, kind in namespace.Properties.FIELDS],
                        [xml.primitive(p) for p in props],
                    )
                    self.assertIs(module.PROPERTIES[index], namespace.Properties)
                else:
                    self.assertIsNone(namespace.Properties)
            self.assertEqual(
                set(module.BY_NAME), {f"{c}.{m}" for c, m in xml.methods}, version
            )
            self.assertEqual(len(module.METHODS), len(xml.methods), version)
            for (cname, mname), element in xml.methods.items():
                cls = module.BY_NAME[f"{cname}.{mname}"]
                where = (version, cls.NAME)
                self.assertIs(getattr(classes[cname], _camel(mname)), cls)
                self.assertEqual(cls.METHOD_ID, int(element.get("index", "")), where)
                self.assertEqual(cls.CLASS_ID, xml.classes[cname][0], where)
                self.assertIs(module.METHODS[method_index(cls.CLASS_ID, cls.METHOD_ID)], cls)
                self.assertEqual(cls.SYNCHRONOUS, xml.synchronous[(cname, mname)], where)
                self.assertEqual(cls.CONTENT, element.get("content") == "1", where)
                self.assertEqual(
                    [kind for _, kind in cls.FIELDS],
                    [xml.primitive(f) for f in element.findall("field")],
                    where,
                )
                self.assertEqual(
                    {r.NAME for r in cls.RESPONSES},
                    {f"{cname}.{r}" for r in xml.responses[(cname, mname)]},
                    where,
                )

    def test_docstrings(self) -> None:
        """Method, class and property docstrings carry the spec's text."""
        for version, (module, _, _) in MODULES.items():
            documented: list[type[Any]] = [*module.CLASSES, *module.PROPERTIES.values()]
            for cls in module.METHODS.values():
                where = (version, cls.NAME)
                doc = cls.__doc__ or ""
                summary, _, rest = doc.partition("\n\n")
                self.assertTrue(summary.strip(), where)
                self.assertNotEqual(summary.strip(), f"{cls.NAME}.", where)
                self.assertTrue(rest.strip(), where)
                for name, kind in cls.FIELDS:
                    self.assertIn(f":ivar {name}: ({kind}) ", doc, where)
            for cls in documented:
                self.assertGreater(len((cls.__doc__ or "").strip()), 20, (version, cls.NAME))
            for cls in module.PROPERTIES.values():
                for name, kind in cls.FIELDS:
                    self.assertIn(f":ivar {name}: ({kind})", cls.__doc__ or "")

    def test_0_9_extras(self) -> None:
        """0-9 has file, stream, dtx, tunnel and message, and channel.resume/ping/pong/ok."""
        names = {k.NAME: k.CLASS_ID for k in _amqp0_9.CLASSES}
        self.assertEqual(
            {n: names[n] for n in ("file", "stream", "dtx", "tunnel", "message")},
            {"file": 70, "stream": 80, "dtx": 100, "tunnel": 110, "message": 120},
        )
        channel = {m.NAME: m.METHOD_ID for m in _amqp0_9.Channel.METHODS}
        self.assertEqual(
            {n: channel[f"channel.{n}"] for n in ("resume", "ping", "pong", "ok")},
            {"resume": 50, "ping": 60, "pong": 70, "ok": 80},
        )
        self.assertEqual(_amqp0_9.ChannelResume.FIELDS, (("channel_id", "longstr"),))
        self.assertEqual(
            {m.NAME.split(".")[1] for m in _amqp0_9.Message.METHODS},
            {"transfer", "consume", "cancel", "get", "recover", "open", "close", "append",
             "checkpoint", "resume", "qos", "ok", "empty", "reject", "offset"},
        )
        self.assertEqual(_amqp0_9.MessageTransfer.FIELDS[-1], ("body", "content"))
        self.assertIs(_amqp0_9.TABLES, fields.AMQP0_9)
        self.assertIs(_amqp0_8.TABLES, fields.RABBITMQ)
        self.assertIs(_amqp0_9_1.TABLES, fields.RABBITMQ)

    def test_0_9_1_extensions(self) -> None:
        """0-9-1 carries RabbitMQ's extensions with their ids."""
        spec = _amqp0_9_1.BY_NAME
        expected = {
            "connection.blocked": (10, 60, (("reason", "shortstr"),)),
            "connection.unblocked": (10, 61, ()),
            "connection.update-secret": (10, 70, (("new_secret", "longstr"), ("reason", "shortstr"))),
            "connection.update-secret-ok": (10, 71, ()),
            "confirm.select": (85, 10, (("nowait", "bit"),)),
            "confirm.select-ok": (85, 11, ()),
            "exchange.bind": (40, 30, None),
            "exchange.bind-ok": (40, 31, ()),
            "exchange.unbind": (40, 40, None),
            "exchange.unbind-ok": (40, 51, ()),
            "basic.nack": (60, 120, (("delivery_tag", "longlong"), ("multiple", "bit"), ("requeue", "bit"))),
        }
        for name, (class_id, method_id, fields_) in expected.items():
            cls = spec[name]
            self.assertEqual((cls.CLASS_ID, cls.METHOD_ID), (class_id, method_id), name)
            if fields_ is not None:
                self.assertEqual(cls.FIELDS, fields_, name)
        self.assertEqual(
            [kind for _, kind in spec["exchange.bind"].FIELDS],
            ["short", "shortstr", "shortstr", "shortstr", "bit", "table"],
        )

    def test_handler_names(self) -> None:
        """Each method class names its handler; the rule is the generator's."""
        self.assertEqual(_amqp0_9_1.QueueDeclare.HANDLER, "queue_declare")
        self.assertEqual(_amqp0_9_1.BasicGetOk.HANDLER, "basic_get_ok")
        self.assertEqual(_amqp0_9_1.ConnectionUpdateSecretOk.HANDLER, "connection_update_secret_ok")
        self.assertEqual(_amqp0_9.MessageOk.HANDLER, "message_ok")
        for module in (_amqp0_8, _amqp0_9, _amqp0_9_1):
            names = [cls.HANDLER for cls in module.METHODS.values()]
            self.assertEqual(len(set(names)), len(names))
            self.assertTrue(all(name.isidentifier() for name in names))

    def test_method_protocols(self) -> None:
        """methods.py has one Protocol per method name of any version, with
        exactly the fields every version defining that method has, typed as
        those versions type them."""
        python = {
            "bit": "bool", "octet": "int", "short": "int", "long": "int", "longlong": "int",
            "shortstr": "str", "longstr": "bytes", "table": "dict[str, Any]",
            "timestamp": "datetime", "content": "_f.Content",
        }
        by_name: dict[str, list[Any]] = {}
        for module in (_amqp0_8, _amqp0_9, _amqp0_9_1):
            for cls in module.METHODS.values():
                by_name.setdefault(cls.__name__, []).append(cls)
        protocols = {
            name for name, value in vars(methods).items()
            if isinstance(value, type) and value.__module__ == methods.__name__
        }
        self.assertEqual(protocols, set(by_name) | {"AnyMethod", "Spec"})
        for name, classes in by_name.items():
            protocol = getattr(methods, name)
            fields_ = [dict(cls.FIELDS) for cls in classes]
            shared = set(fields_[0]).intersection(*fields_[1:])
            declared = {
                attr: value.fget.__annotations__["return"]
                for attr, value in vars(protocol).items() if isinstance(value, property)
            }
            self.assertEqual(set(declared), shared, name)
            for attr, annotation in declared.items():
                kinds = {python[f[attr]] for f in fields_}
                self.assertEqual(set(annotation.split(" | ")), kinds, (name, attr))
        self.assertNotIn("arguments", vars(methods.BasicConsume))
        self.assertIn("``arguments`` (0-9-1)", methods.BasicConsume.__doc__ or "")

    def test_spec_protocol(self) -> None:
        """methods.Spec builds exactly the methods every version has, each
        with keyword-only arguments for the fields they all have."""
        modules = (_amqp0_8, _amqp0_9, _amqp0_9_1)
        common = set.intersection(*({cls.__name__ for cls in m.METHODS.values()} for m in modules))
        builders = {
            name for name, value in vars(methods.Spec).items()
            if callable(value) and name[:1].isupper()
        }
        self.assertEqual(builders, common)
        self.assertNotIn("ConfirmSelectOk", builders)
        for name in common:
            fields_ = [dict(getattr(m, name).FIELDS) for m in modules]
            shared = {f for f in fields_[0] if all(other.get(f) == fields_[0][f] for other in fields_)}
            signature = inspect.signature(getattr(methods.Spec, name))
            parameters = list(signature.parameters.values())[1:]
            self.assertEqual({p.name for p in parameters}, shared, name)
            self.assertTrue(all(p.kind is p.KEYWORD_ONLY for p in parameters), name)

    def test_basic_recover_waits_for_recover_ok(self) -> None:
        """The stripped 0-9-1 XML lost this; the full spec and RabbitMQ have it."""
        self.assertTrue(_amqp0_9_1.BasicRecover.SYNCHRONOUS)
        self.assertEqual(_amqp0_9_1.BasicRecover.RESPONSES, (_amqp0_9_1.BasicRecoverOk,))
        self.assertEqual(_amqp0_9_1.BasicRecoverAsync.RESPONSES, ())

    def test_plain_0_9_1_is_a_subset(self) -> None:
        """Every method of spec/amqp0-9-1.xml exists with the same ids and types."""
        xml = _XMLSpec(SPEC_DIR / "amqp0-9-1.xml")
        self.assertGreater(len(xml.methods), 40)
        for (cname, mname), element in xml.methods.items():
            cls = _amqp0_9_1.BY_NAME.get(f"{cname}.{mname}")
            self.assertIsNotNone(cls, f"{cname}.{mname} missing")
            assert cls is not None
            self.assertEqual(cls.CLASS_ID, xml.classes[cname][0], cls.NAME)
            self.assertEqual(cls.METHOD_ID, int(element.get("index", "")), cls.NAME)
            fields_ = element.findall("field")
            self.assertEqual(
                [kind for _, kind in cls.FIELDS], [xml.primitive(f) for f in fields_], cls.NAME
            )
            for (attr, _), field in zip(cls.FIELDS, fields_):
                name = _norm(field.get("name", ""))
                if name.startswith("reserved"):
                    continue  # named after 0-9's field in this position
                expected = {"no-wait": "nowait"}.get(name, name).replace("-", "_")
                if keyword.iskeyword(expected):
                    expected += "_"
                self.assertEqual(attr, expected)
        _, props = xml.classes["basic"]
        self.assertEqual(
            [kind for _, kind in _amqp0_9_1.BasicProperties.FIELDS],
            [xml.primitive(p) for p in props],
        )

    def test_reserved_fields_named_after_0_9(self) -> None:
        """0-9-1's reserved fields keep their 0-9 names, so code is portable."""
        names = {cls.NAME: [n for n, _ in cls.FIELDS] for cls in _amqp0_9_1.METHODS.values()}
        self.assertEqual(names["connection.open"], ["virtual_host", "capabilities", "insist"])
        self.assertEqual(names["connection.open-ok"], ["known_hosts"])
        self.assertEqual(names["channel.open"], ["out_of_band"])
        self.assertEqual(names["channel.open-ok"], ["channel_id"])
        self.assertEqual(names["queue.declare"][0], "ticket")
        self.assertEqual(names["basic.publish"][0], "ticket")
        self.assertEqual([n for n, _ in _amqp0_9_1.BasicProperties.FIELDS][-1], "cluster_id")

    def test_reply_codes_match_xml(self) -> None:
        """REPLY_CODES holds exactly the XML's soft and hard errors."""
        for version, (module, structure, _) in MODULES.items():
            xml = _XMLSpec(SPEC_DIR / structure)
            expected = {}
            for c in xml.constants:
                kind = _norm(c.get("class", ""))
                if kind in ("soft-error", "hard-error"):
                    expected[int(c.get("value", ""))] = (_norm(c.get("name", "")), kind == "hard-error")
            self.assertTrue(expected)
            self.assertEqual(
                {code: (rc.name, rc.hard) for code, rc in module.REPLY_CODES.items()},
                expected,
                version,
            )
            for code, rc in module.REPLY_CODES.items():
                self.assertEqual(rc.code, code)
        self.assertFalse(_amqp0_9_1.REPLY_CODES[404].hard)
        self.assertTrue(_amqp0_9_1.REPLY_CODES[501].hard)


# -- more than 15 properties: the flag continuation bit ------------------------

_TYPES = ["shortstr", "octet", "table", "long", "timestamp", "longstr", "short", "longlong"]

#: A class with 20 properties of mixed types (numbers 15 .. 19 go in the
#: second flag word) and one content method.
WIDE_SPEC = """<?xml version="1.0"?>
<amqp major="0" minor="9" revision="1">
  <constant name="frame-end" value="206"/>
  <constant name="wide-error" value="399" class="soft-error"/>
  {domains}
  <class name="wide" index="200">
    {properties}
    <method name="send" index="10" content="1">
      <field name="tag" domain="longlong"/>
    </method>
  </class>
</amqp>
""".format(
    domains="\n  ".join(f'<domain name="{t}" type="{t}"/>' for t in _TYPES),
    properties="\n    ".join(
        f'<field name="p{n}" domain="{_TYPES[n % len(_TYPES)]}"/>' for n in range(20)
    ),
)


def _import_source(name: str, source: str, directory: str) -> ModuleType:
    path = Path(directory) / f"{name}.py"
    path.write_text(source, encoding="utf-8")
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules[name]
    return module


@functools.lru_cache(maxsize=None)
def _wide_module() -> ModuleType:
    """The module generated from WIDE_SPEC, imported from a temporary file."""
    spec = codegen.parse_spec(WIDE_SPEC, "wide-test")
    with tempfile.TemporaryDirectory() as tmp:
        return _import_source("_txamqp09_wide_spec", codegen.generate(spec, "AMQP0_9"), tmp)


class WidePropertiesTests(SynchronousTestCase):
    """A generated class with 20 properties uses two flag words."""

    def setUp(self) -> None:
        self.module = _wide_module()
        #: The generated class (typed Any: its fields are known only at run time).
        self.wide: Any = self.module.WideProperties

    def test_generated(self) -> None:
        self.assertEqual(len(self.wide.FIELDS), 20)
        self.assertEqual(self.module.REPLY_CODES[399].hard, False)
        self.assertEqual(self.module.PROPERTIES, {200: self.wide})
        send: Any = self.module.WideSend
        self.assertTrue(send.CONTENT)
        self.assertEqual(send(tag=7).encode(), b"\x00\xc8\x00\x0a" + (7).to_bytes(8, "big"))

    def test_first_word_only(self) -> None:
        """Properties 0..14 need one word, without the continuation bit."""
        props = self.wide(p0="a", p14=5)  # a shortstr and a short
        encoded = props.encode()
        self.assertEqual(encoded, b"\x80\x02\x01a\x00\x05")
        self.assertEqual(decode_properties(self.wide, encoded, 0), props)

    def test_second_word(self) -> None:
        """p16 alone: an empty first word with bit 0 set, then bit 14."""
        props = self.wide(p16="x")  # p16 is a shortstr
        encoded = props.encode()
        self.assertEqual(encoded, b"\x00\x01\x40\x00\x01x")
        self.assertEqual(encoded[1] & 1, 1)
        self.assertEqual(decode_properties(self.wide, encoded, 0), props)

    def test_all_twenty(self) -> None:
        values: dict[str, Any] = {}
        samples = {
            "shortstr": "s",
            "octet": 9,
            "table": {"k": True},
            "long": 70000,
            "timestamp": fields.decode_timestamp(b"\x00" * 4 + b"\x01" * 4, 0)[0],
            "longstr": b"long",
            "short": 300,
            "longlong": 2**40,
        }
        for name, kind in self.wide.FIELDS:
            values[name] = samples[kind]
        props = self.wide(**values)
        encoded = props.encode()
        self.assertEqual(encoded[:4], b"\xff\xff\xf8\x00")
        self.assertEqual(decode_properties(self.wide, encoded, 0), props)

    def test_unknown_second_word_flag(self) -> None:
        """A flag for a 21st property is a syntax error."""
        with self.assertRaises(AMQPSyntaxError) as caught:
            decode_properties(self.wide, b"\x00\x01\x04\x00", 0)
        self.assertEqual(caught.exception.reply_code, 502)
        self.assertIn("lacks", caught.exception.reply_text)

    def test_third_word(self) -> None:
        """Only two flag words exist: a continuation bit in the second fails."""
        with self.assertRaises(AMQPSyntaxError) as caught:
            decode_properties(self.wide, b"\x00\x01\x00\x01\x00\x00", 0)
        self.assertIn("2 word(s)", caught.exception.reply_text)

    @s.wire_settings
    @given(data=st.data())
    def test_round_trip(self, data: Any) -> None:
        props = data.draw(s.properties(self.wide, fields.AMQP0_9))
        encoded = props.encode()
        self.assertEqual(decode_properties(self.wide, encoded, 0), props)
        second = any(getattr(props, f"p{n}") is not None for n in range(15, 20))
        self.assertEqual(encoded[1] & 1, 1 if second else 0)
