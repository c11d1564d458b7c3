"""The package keeps its layers, as its source says (:mod:`tests.layers`):
no circles inside a package, and no import of a layer drawn above in
docs/architecture.rst."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from textwrap import dedent
from typing import Callable

from twisted.trial.unittest import SynchronousTestCase

from tests.layers import ImportGraph, read_layers, read_modules


@cache
def package_graph() -> ImportGraph:
    """The import graph of txamqp09, read once."""
    return ImportGraph(read_modules())


class CircleTests(SynchronousTestCase):
    """No module imports a module of its own package that imports it back,
    directly or round a ring (one test per package, made below)."""

    def assert_no_circles(self, package: str) -> None:
        """Fail with every circle inside *package* and the imports making it."""
        circles = package_graph().circles_in(package)
        self.assertEqual("\n".join(map(str, circles)), "", f"{package} has modules importing one another")


def _circle_test(package: str) -> Callable[[CircleTests], None]:
    def test(self: CircleTests) -> None:
        self.assert_no_circles(package)

    test.__doc__ = f"No circle inside {package}."
    return test


for _package in sorted({module.package for module in read_modules().values()}):
    setattr(CircleTests, "test_" + _package.replace(".", "_"), _circle_test(_package))


class OrderTests(SynchronousTestCase):
    """Every module imports from its own unit and the layers drawn below it."""

    def test_every_import_looks_down(self) -> None:
        self.assertEqual(package_graph().layer_breaches(read_layers()), [])


def write_package(root: Path, files: dict[str, str]) -> None:
    """Write *files* (path to source) under *root*."""
    for name, source in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(dedent(source))


class CheckerTests(SynchronousTestCase):
    """The checker sees the imports the rules are about."""

    def setUp(self) -> None:
        self.root = Path(self.mktemp())
        write_package(self.root, {
            "pkg/__init__.py": "",
            "pkg/low/__init__.py": "",
            "pkg/low/base.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.low.top import Top\n",
            "pkg/low/top.py": "def late():\n    from . import base\n",
            "pkg/low/alone.py": "import pkg.low.base\n",
            "pkg/high/__init__.py": "from pkg.high.user import User\n",
            "pkg/high/user.py": "from ..low.base import Base\nfrom pkg.high import User\n",
            "pkg/side.py": "",
            "layers.rst": """
                Layers
                ======

                .. code-block:: text

                    high/  side.py      above
                    low/   __init__.py  below
            """,
        })
        self.graph = ImportGraph(read_modules(self.root, "pkg"))

    def test_circle_through_type_checking_and_function_imports(self) -> None:
        [circle] = self.graph.circles_in("pkg.low")
        self.assertEqual(circle.modules, ("pkg.low.base", "pkg.low.top"))
        self.assertEqual(
            sorted(str(each) for each in circle.imports),
            ["pkg/low/base.py:3 imports pkg.low.top", "pkg/low/top.py:2 imports pkg.low.base"],
        )

    def test_circle_through_a_package_init(self) -> None:
        [circle] = self.graph.circles_in("pkg.high")
        self.assertEqual(circle.modules, ("pkg.high", "pkg.high.user"))

    def test_one_way_imports_are_no_circle(self) -> None:
        self.assertEqual(self.graph.circles_in("pkg"), [])
        self.assertIn("pkg.low.base", self.graph.edges["pkg.low.alone"])
        self.assertIn("pkg.low.base", self.graph.edges["pkg.high.user"])

    def test_layers_read_lowest_first(self) -> None:
        self.assertEqual(read_layers(self.root / "layers.rst"), [["low/", "__init__.py"], ["high/", "side.py"]])

    def test_breaches(self) -> None:
        write_package(self.root, {
            "pkg/low/up.py": "from pkg.high.user import User\n",
            "pkg/high/beside.py": "import pkg.side\n",
            "pkg/extra.py": "",
        })
        graph = ImportGraph(read_modules(self.root, "pkg"))
        self.assertEqual(
            sorted(graph.layer_breaches(read_layers(self.root / "layers.rst"))),
            [
                "pkg/extra.py: its unit extra.py is in no layer of architecture.rst",
                "pkg/high/beside.py:1 imports pkg.side: side.py stands beside high/",
                "pkg/low/up.py:1 imports pkg.high.user: high/ stands above low/",
            ],
        )

    def test_the_drawing(self) -> None:
        layers = read_layers()
        self.assertIn("wire/", layers[0])
        self.assertEqual(layers[-1], ["testing/"])
        self.assertIn("txamqp09.protocol", package_graph().edges["txamqp09.client.connection"])
