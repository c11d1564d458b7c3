"""Fuzzing the broker's input path: the harness, its atheris target, and the inputs it broke."""
