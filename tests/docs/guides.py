"""The code blocks of the guides in docs/, as the guide tests read them.

Every ``.rst`` file in docs/ is a guide; its blocks are read in order:

- ``.. code-block:: python`` blocks are programs: the tests run each one,
  in a fresh interpreter, against one broker shared by every guide (see
  ``tests/docs/test_guides.py``). A line ``URL = "amqp://..."`` (or
  ``amqps://``) is replaced by that broker's URL, and a line
  ``API = "HOST:PORT"`` by the address of its management API; a block
  without one runs as it is.
- A Python block that cannot run in the suite opts out with a comment right
  before it (Sphinx and GitHub show nothing of it), giving the reason::

      .. not-run: needs a Spark session; tests/spark/test_pipeline.py runs it

      .. code-block:: python

- Literal blocks (``::``) and code blocks in another language
  (``console``, ``text``, ``json``...) are shell sessions, output and files:
  they are not run. A literal block holding Python statements is refused by
  the tests: give it ``.. code-block:: python`` (so that it runs) or the
  ``not-run`` comment.
"""

from __future__ import annotations

import ast
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Optional
from unittest import SkipTest

from twisted.internet.defer import Deferred
from twisted.internet.utils import getProcessOutputAndValue

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
README = ROOT / "README.rst"
_SPHINX_ONLY = re.compile(r'Unknown (interpreted text role|directive type)|No (role|directive) entry')

_DIRECTIVE = re.compile(r"^(\s*)\.\. code-block::\s*(\S*)\s*$")
_NOT_RUN = re.compile(r"^\s*\.\. not-run:(.*)$")
_URL_LINE = re.compile(r'^URL = "(amqps?)://[^"]*"$', re.MULTILINE)
_API_LINE = re.compile(r'^API = "[^"]*"$', re.MULTILINE)


@dataclass(frozen=True)
class Block:
    """One code block of a guide.

    :ivar guide: the guide's file name (``client.rst``).
    :ivar line: the line its first line of code is on (from 1).
    :ivar language: ``python``, another code-block language, or None for a
        literal (``::``) block.
    :ivar code: the block's text, unindented.
    :ivar not_run: the reason given by a ``.. not-run:`` comment, or None.
    """

    guide: str
    line: int
    language: Optional[str]
    code: str
    not_run: Optional[str]

    @property
    def where(self) -> str:
        """``docs/client.rst:423``."""
        return f"docs/{self.guide}:{self.line}"

    @property
    def runs(self) -> bool:
        """Whether the guide tests run it."""
        return self.language == "python" and self.not_run is None

    def program(self, urls: dict[str, str]) -> str:
        """The code with its ``URL = "amqp(s)://..."`` line pointing at *urls*
        (by scheme) and its ``API = "HOST:PORT"`` line at ``urls["api"]``."""
        code = _URL_LINE.sub(lambda match: f"URL = {urls[match.group(1)]!r}", self.code)
        return _API_LINE.sub(lambda match: f"API = {urls['api']!r}", code)

    def run(self, urls: dict[str, str]) -> Deferred[tuple[bytes, bytes, int]]:
        """Run :meth:`program` in a fresh interpreter that imports this source
        tree: its output, errors and exit status."""
        environment = dict(os.environ)
        environment["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), environment.get("PYTHONPATH")]))
        return getProcessOutputAndValue(  # type: ignore[no-any-return]
            sys.executable, ["-c", self.program(urls)], env=environment, path=str(ROOT)
        )

    def failed(self, urls: dict[str, str], out: bytes, err: bytes) -> str:
        """The message of a test that saw the block fail."""
        return f"{self.where} failed:\n{self.program(urls)}\n--- output:\n{out.decode()}\n--- errors:\n{err.decode()}"

    def looks_like_python(self) -> bool:
        """Whether the block holds Python statements (not a lone literal,
        such as a JSON document)."""
        try:
            tree = ast.parse(self.code)
        except SyntaxError:
            return False
        statements = tree.body
        if len(statements) == 1 and isinstance(statements[0], ast.Expr):
            try:
                ast.literal_eval(statements[0].value)
                return False
            except ValueError:
                pass
        return bool(statements)


def markup_problems(path: Path) -> list[tuple[int, str]]:
    """Where *path* is not valid reStructuredText, as docutils reports it:
    errors and worse (a malformed table, a broken section), except Sphinx's
    own roles and directives, which plain docutils does not know; and
    images whose file is not next to the guide."""
    try:
        from docutils.core import publish_doctree
        from docutils.utils import Reporter
    except ImportError:
        raise SkipTest("docutils is not installed (it comes with the test extra)")
    quiet = Reporter.SEVERE_LEVEL + 1
    document = publish_doctree(
        path.read_text(), source_path=str(path), settings_overrides={"report_level": quiet, "halt_level": quiet},
    )
    missing_images = [
        (image.line or 0, f"image {image['uri']} is missing")
        for image in document.findall(lambda node: node.tagname == "image")
        if "://" not in image["uri"] and not (path.parent / image["uri"]).is_file()
    ]
    return [
        (message.get("line") or 0, message.children[0].astext())
        for message in document.findall(lambda node: node.tagname == "system_message")
        if message["level"] >= Reporter.ERROR_LEVEL and not _SPHINX_ONLY.search(message.astext())
    ] + missing_images


def guides() -> list[Path]:
    """Every guide, in the order the tests run them (by file name)."""
    return sorted(DOCS.glob("*.rst"))


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _body(lines: list[str], start: int, indent: int) -> tuple[int, str]:
    """The block whose lines, from *start*, are indented beyond *indent*:
    the index of its first line and its text, unindented."""
    first = start
    while first < len(lines) and not lines[first].strip():
        first += 1
    end = first
    while end < len(lines) and (not lines[end].strip() or _indent(lines[end]) > indent):
        end += 1
    body = lines[first:end]
    while body and not body[-1].strip():
        body.pop()
    margin = min((_indent(line) for line in body if line.strip()), default=0)
    return first, "\n".join(line[margin:] for line in body) + "\n"


def _not_run(lines: list[str], index: int) -> Optional[str]:
    """The ``.. not-run:`` reason on the last non-blank line before *index*."""
    before = index - 1
    while before >= 0 and not lines[before].strip():
        before -= 1
    match = _NOT_RUN.match(lines[before]) if before >= 0 else None
    return match.group(1).strip() if match else None


def blocks(path: Path) -> list[Block]:
    """The code blocks of the guide at *path*, in order."""
    lines = path.read_text(encoding="utf-8").splitlines()
    found = []
    for index, line in enumerate(lines):
        directive = _DIRECTIVE.match(line)
        if directive is not None:
            language = directive.group(2) or None
        elif line.rstrip().endswith("::") and not line.lstrip().startswith(".. "):
            language = None
        else:
            continue
        body_start = index + 1
        while body_start < len(lines) and lines[body_start].strip().startswith(":"):
            body_start += 1  # the directive's options (:linenos: ...)
        first, code = _body(lines, body_start, _indent(line))
        if code.strip():
            found.append(Block(path.name, first + 1, language, code, _not_run(lines, index)))
    return found
