"""The tests' Spark session: its Python workers import the installed pyspark."""

from __future__ import annotations

from typing import Any

from twisted.internet.threads import deferToThread
from twisted.trial.unittest import TestCase

from tests.spark.session import spark_missing, spark_session


def _pyspark_file(_: Any) -> str:
    import pyspark

    return str(pyspark.__file__)


class SessionTests(TestCase):
    """What the session helper promises Spark's Python workers."""

    skip = spark_missing()
    timeout = 180

    def test_workers_import_the_installed_pyspark(self) -> Any:
        """Not the copy in Spark's pyspark.zip, which every worker would compile again."""
        import pyspark

        def collect() -> list[str]:
            return spark_session().sparkContext.parallelize([0], 1).map(_pyspark_file).collect()

        return deferToThread(collect).addCallback(self.assertEqual, [pyspark.__file__])
