"""Tests of txamqp09.spark, the PySpark data source."""
