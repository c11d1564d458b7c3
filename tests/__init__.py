"""txamqp09's test suite; run it with ``trial tests``."""
