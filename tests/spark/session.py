"""One local Spark session per test process, and what the Spark tests need
to run: pyspark and pyarrow (the ``spark`` extra) and Java."""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any, Optional

__all__ = ["ROOT", "arrow_missing", "spark_missing", "spark_session", "configure"]

#: The source tree the tests run from; Spark's Python workers import it.
ROOT = str(Path(__file__).resolve().parents[2])

_lock = threading.Lock()
_session: Any = None
_spark_home: Optional[str] = None
_spark_home_lock = threading.Lock()


def arrow_missing() -> Optional[str]:
    """Why tests of the Arrow forms of messages cannot run here, or None."""
    try:
        import numpy  # noqa: F401
        import pyarrow  # noqa: F401
    except ImportError as error:
        return f"the spark extra is not installed ({error}); pip install '.[spark]'"
    return None


def spark_missing() -> Optional[str]:
    """Why Spark tests cannot run here, or None when they can (a trial ``skip``)."""
    missing = arrow_missing()
    if missing:
        return missing
    try:
        import pyspark
    except ImportError as error:
        return f"the spark extra is not installed ({error}); pip install '.[spark]'"
    version = tuple(int(part) for part in pyspark.__version__.split(".")[:2])
    if version < (4, 1):
        return f"the data source needs pyspark 4.1 or newer (Arrow stream writers), not {pyspark.__version__}"
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        return "Spark needs Java (17 or newer), and there is no java on PATH"
    return None


def spark_home_without_zips() -> str:
    """A Spark home that is the installed one without its ``python``
    directory (made once per process, removed at exit; the installed one
    when it has no ``python/lib/pyspark.zip``).

    Spark starts every Python worker with ``SPARK_HOME/python/lib/pyspark.zip``
    first on its path. Imported from that archive, which holds no compiled
    bytecode, pyspark is compiled again by every worker: about three times
    the CPU of importing the installed package (0.6 s instead of 0.2 s
    here). The worker that serves a streaming query's Python source is
    started afresh for each query, and Spark gives it a fixed 10 s, which
    no setting changes, to connect back; on a loaded machine the
    compilation alone took most of it ("Python worker failed to connect
    back"). Without the archive, workers import the installed package, the
    same version, from its compiled files.
    """
    from pyspark.find_spark_home import _find_spark_home

    installed = _find_spark_home()
    if not os.path.exists(os.path.join(installed, "python", "lib", "pyspark.zip")):
        return installed  # already without (a child process of a test run)
    home = tempfile.mkdtemp(prefix="txamqp09-spark-home-")
    atexit.register(shutil.rmtree, home, True)
    for name in os.listdir(installed):
        if name != "python":
            os.symlink(os.path.join(installed, name), os.path.join(home, name))
    return home


def configure(builder: Any) -> Any:
    """*builder* set up for tests: local[2] on loopback, no UI, workers that
    run this interpreter and import this source tree, and the installed
    pyspark (see :func:`spark_home_without_zips`)."""
    global _spark_home
    with _spark_home_lock:
        if _spark_home is None:
            _spark_home = spark_home_without_zips()
    os.environ["SPARK_HOME"] = _spark_home
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    return (
        builder.master("local[2]")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.executorEnv.PYTHONPATH", ROOT)
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.streaming.stopTimeout", "10s")
    )


def spark_session() -> Any:
    """The process's Spark session with format "amqp09" registered (started
    on first use, which takes several seconds; call it off the reactor thread).

    The session is made the calling thread's active one: Spark looks Python
    data sources up in the active session of the thread that starts a query.
    """
    global _session
    with _lock:
        if _session is None:
            from pyspark.sql import SparkSession

            from txamqp09.spark import register

            _session = configure(SparkSession.builder.appName("txamqp09-tests")).getOrCreate()
            _session.sparkContext.setLogLevel("ERROR")
            register(_session)
    _session._jvm.SparkSession.setActiveSession(_session._jsparkSession)
    return _session
