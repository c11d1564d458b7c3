"""The package installs as a user installs it, and CI runs README's command."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import venv
from pathlib import Path

from twisted.trial.unittest import SynchronousTestCase

ROOT = Path(__file__).resolve().parent.parent


def _tracked_files() -> list[str]:
    out = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    return [name for name in out.stdout.splitlines() if (ROOT / name).is_file()]


def _without_pythonpath() -> dict[str, str]:
    """This environment less PYTHONPATH, which trial's -j workers set to the
    running interpreter's path and would let the venv see the host's copy."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


class InstalledPluginTests(SynchronousTestCase):
    """``pip install .`` into a fresh virtualenv installs the twistd plugin."""

    def setUp(self) -> None:
        if shutil.which("git") is None or not (ROOT / ".git").exists():
            raise self.skipTest("needs a git checkout to copy the source tree from")
        for build_tool in ("setuptools", "wheel"):
            if importlib.util.find_spec(build_tool) is None:
                raise self.skipTest(
                    f"needs {build_tool} installed to build the package without the network"
                )
        self.work = Path(tempfile.mkdtemp())
        self.addCleanup(shutil.rmtree, self.work, True)

    def _venv(self) -> Path:
        """A virtualenv that sees the running interpreter's packages (so Twisted
        imports offline) but no copy of this project: not its package, not its
        plugin file, not an editable checkout's .pth file."""
        env_dir = self.work / "venv"
        venv.create(env_dir, with_pip=False)
        site = subprocess.run(
            [str(env_dir / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        Path(site, "host-packages.pth").write_text(str(self._host_packages()) + "\n")
        return env_dir

    def _host_packages(self) -> Path:
        """The running interpreter's packages, less this project's files."""
        host = Path(sysconfig.get_paths()["purelib"])
        deps = self.work / "deps"
        deps.mkdir()
        for entry in host.iterdir():
            if entry.name.startswith(("txamqp09", "__editable__")) or entry.suffix == ".pth":
                continue
            if entry.name == "twisted":
                shutil.copytree(
                    entry,
                    deps / "twisted",
                    ignore=shutil.ignore_patterns("txamqp09_plugin.py", "dropin.cache"),
                )
            else:
                (deps / entry.name).symlink_to(entry)
        return deps

    def _twistd_help(self, python: Path) -> str:
        result = subprocess.run(
            [str(python), "-c", "import sys; from twisted.scripts.twistd import run; sys.argv[0] = 'twistd'; run()", "--help"],
            cwd=self.work,
            capture_output=True,
            text=True,
            env=_without_pythonpath(),
        )
        return result.stdout + result.stderr

    def test_twistd_lists_amqp09_after_install(self) -> None:
        source = self.work / "src"
        for name in _tracked_files():
            target = source / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, target)
        env_dir = self._venv()
        python = env_dir / "bin" / "python"
        self.assertNotIn("amqp09", self._twistd_help(python))
        subprocess.run(
            [sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet",
             "--no-deps", "--no-build-isolation", str(source)],
            cwd=self.work,
            check=True,
            capture_output=True,
        )
        self.assertIn("An AMQP 0-9, 0-8 and 0-9-1 broker.", self._twistd_help(python))
        where = subprocess.run(
            [str(python), "-c", _PLUGIN_FILE],
            cwd=self.work,
            capture_output=True,
            text=True,
            check=True,
            env=_without_pythonpath(),
        ).stdout.split()
        self.assertEqual(len(where), 2, where)
        for path in where:
            self.assertTrue(Path(path).resolve().is_relative_to(env_dir.resolve()), path)
        ctl = subprocess.run(
            [str(env_dir / "bin" / "amqp09ctl"), "--help"], cwd=self.work, capture_output=True, text=True,
            env=_without_pythonpath(),
        )
        self.assertEqual(ctl.returncode, 0, ctl.stderr)
        self.assertIn("list_queues", ctl.stdout)
        installed_ui = subprocess.run(
            [str(python), "-c", _UI_FILES], cwd=self.work, capture_output=True, text=True, check=True,
            env=_without_pythonpath(),
        ).stdout.splitlines()
        static = ROOT / "txamqp09" / "management" / "ui" / "static"
        source_ui = sorted(str(path.relative_to(static)) for path in static.rglob("*") if path.is_file())
        self.assertIn("index.html", source_ui)
        self.assertEqual(installed_ui[1:], source_ui)
        self.assertTrue(Path(installed_ui[0]).resolve().is_relative_to(env_dir.resolve()), installed_ui[0])


_PLUGIN_FILE = """
from twisted.application.service import IServiceMaker
from twisted.plugin import getPlugins
import twisted.plugins.txamqp09_plugin as plugin
import txamqp09
assert [p for p in getPlugins(IServiceMaker) if p.tapname == "amqp09"]
print(plugin.__file__)
print(txamqp09.__file__)
"""

#: Prints where the installed web UI's files are, then each file (relative).
_UI_FILES = """
from pathlib import Path
from txamqp09.management.ui import STATIC_DIR
print(STATIC_DIR)
for path in sorted(str(p.relative_to(STATIC_DIR)) for p in Path(STATIC_DIR).rglob("*") if p.is_file()):
    print(path)
"""


#: A child Python in which the spark extra's modules do not exist, as on a
#: machine where only README's test command installed anything; argv[1] is
#: what it runs then: "load" (import every test module) or "spark" (run the
#: Spark tests).
_WITHOUT_SPARK_EXTRA = """
import sys
from importlib.abc import MetaPathFinder

class HideSparkExtra(MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in ("pyspark", "pyarrow", "numpy"):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, HideSparkExtra())
if sys.argv[1] == "load":
    from twisted.trial.runner import ErrorHolder, TestLoader

    def cases(suite):
        if isinstance(suite, ErrorHolder) or not hasattr(suite, "__iter__"):
            yield suite
            return
        for test in suite:
            yield from cases(test)

    found = list(cases(TestLoader().loadByName("tests", recurse=True)))
    for test in found:
        if isinstance(test, ErrorHolder):
            print(test.description, test.error[1])
    print(len(found), "tests")
else:
    from twisted.scripts.trial import run
    sys.argv = ["trial", "tests.spark"]
    run()
"""


class WithoutSparkExtraTests(SynchronousTestCase):
    """README's test command installs the test extra only: no test module may
    need the spark extra to import, and the Spark tests skip without it."""

    def _child(self, what: str) -> str:
        result = subprocess.run(
            [sys.executable, "-c", _WITHOUT_SPARK_EXTRA, what],
            cwd=ROOT,
            capture_output=True,
            text=True,
            env={**_without_pythonpath(), "PYTHONPATH": str(ROOT)},
        )
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        return result.stdout

    def test_every_test_module_imports(self) -> None:
        lines = self._child("load").splitlines()
        self.assertEqual(len(lines), 1, "\n".join(lines))
        self.assertGreater(int(lines[0].split()[0]), 1000)

    def test_spark_tests_skip(self) -> None:
        output = self._child("spark")
        self.assertIn("the spark extra is not installed", output)
        self.assertRegex(output, r"PASSED \(skips=\d+, successes=\d+\)")


class ReadmeCommandTests(SynchronousTestCase):
    """README.rst gives the two commands, and .ci/run runs the test command."""

    def test_readme_has_both_commands(self) -> None:
        readme = (ROOT / "README.rst").read_text()
        self.assertRegex(readme, r"\n    pip install \. && twistd -n amqp09 --port 5672\n")
        self.assertRegex(readme, r"\n    pip install .*&& python -m twisted.trial tests\n")

    def test_ci_extracts_readme_test_command(self) -> None:
        script = (ROOT / ".ci" / "run").read_text()
        pattern = re.search(r"sed -n '(s/.*/p)' README.rst", script)
        assert pattern is not None
        extracted = subprocess.run(
            ["sed", "-n", pattern.group(1), "README.rst"], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout.strip()
        self.assertTrue(extracted.endswith("python -m twisted.trial tests"), extracted)
        self.assertIn(extracted, (ROOT / "README.rst").read_text())
