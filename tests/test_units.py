"""Sizes with units, as options and configuration write them."""

from __future__ import annotations

from twisted.python import usage
from twisted.trial.unittest import SynchronousTestCase

from txamqp09.tap import Options
from txamqp09.units import format_size, parse_size


class ParseSizeTests(SynchronousTestCase):
    def test_binary_and_decimal_units(self) -> None:
        """KiB..TiB are powers of 1024, kB..TB powers of 1000, case aside."""
        cases = {
            "4096": 4096,
            "10B": 10,
            "1kB": 1000,
            "1KB": 1000,
            "512MB": 512_000_000,
            "2GB": 2_000_000_000,
            "1TB": 10**12,
            "1KiB": 1024,
            "256MiB": 256 * 2**20,
            "256mib": 256 * 2**20,
            "1GiB": 2**30,
            "1TiB": 2**40,
            " 64 MiB ": 64 * 2**20,
            "1.5GiB": 3 * 2**29,
            ".5KiB": 512,
        }
        self.assertEqual({text: parse_size(text) for text in cases}, cases)

    def test_fraction_of_a_byte_is_dropped(self) -> None:
        self.assertEqual(parse_size("1.5"), 1)

    def test_bad_sizes_say_what_is_accepted(self) -> None:
        for text in ("", "MiB", "256M", "-1", "1e6", "12 parsecs", "1.2.3KiB"):
            error = self.assertRaises(ValueError, parse_size, text)
            self.assertIn(f"{text!r} is not a size", str(error))
            self.assertIn("256MiB", str(error))

    def test_format_size_uses_the_largest_binary_unit(self) -> None:
        self.assertEqual(
            [format_size(size) for size in (0, 1000, 2048, 256 * 2**20, 2**30 + 2**20, 2**40)],
            ["0B", "1000B", "2KiB", "256MiB", "1025MiB", "1TiB"],
        )


class SizeOptionsTests(SynchronousTestCase):
    def test_size_options_take_units(self) -> None:
        options = Options()
        options.parseOptions(["--memory-budget", "1GiB", "--high-watermark", "512MB", "--frame-max", "128KiB"])
        self.assertEqual(
            (options["memory-budget"], options["high-watermark"], options["frame-max"]),
            (2**30, 512_000_000, 131072),
        )

    def test_bad_size_is_a_usage_error(self) -> None:
        error = self.assertRaises(usage.UsageError, Options().parseOptions, ["--memory-budget", "lots"])
        self.assertIn("'lots' is not a size", str(error))
