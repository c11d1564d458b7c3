"""txamqp09: AMQP 0-9, 0-8 and 0-9-1 for Twisted.

A broker (``twistd amqp09``), a deferred-based client, and a PySpark data
source, built on one wire layer generated from the protocol specifications.
"""

__version__ = "0.1.0"
