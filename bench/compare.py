"""Every benchmark that has a RabbitMQ counterpart, against both brokers, in one run.

Runs, in this order:

- ``bench/broker.py``: 16 B transient messages 1p1c with no-ack, and 1 KiB
  with acks (the fastest of ``--repeat`` runs);
- ``bench/scale.py``: queues, bindings, fan-out, a backlog's bytes per
  message, large bodies, the memory after a drained backlog;
- ``bench/streams.py``: stream appends (confirmed) and reads (acked), run
  as its own process;
- ``bench/spark.py``: the Spark data source's write, classic drain and
  stream read at ``local[2]``, run as its own process (skipped without
  PySpark and Java).

and prints one reStructuredText table: scenario, this broker's figure,
RabbitMQ's, the ratio (greater than 1: this broker does better, whether
the figure is a rate or a cost) and the command that measures that row
alone. The load average is printed with it: wall-clock rates on a loaded
machine are noisy, memory figures are not.

Run::

    python bench/compare.py                 # the whole matrix, full size (about an hour)
    python bench/compare.py --quick         # every scenario, small sizes
    python bench/compare.py --skip spark --skip streams
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from typing import Optional

import broker
import scale
from scale import Figure, Options

#: The directory of the benchmarks.
BENCH = os.path.dirname(os.path.abspath(__file__))
#: The benchmark groups, in the order they run.
GROUPS = ("broker", "scale", "streams", "spark")
#: Sizes of a quick run.
QUICK = Options(
    queues=10_000, bindings=10_000, routed=50_000, fanout_messages=5_000, backlog=200_000,
    large_bytes=64 * scale.MiB, drained=100_000,
)
#: A figure in a report: a number, or a rate followed by "(broker CPU / other CPU)".
_CELL = re.compile(r"([\d,]+(?:\.\d+)?)(?:\s*\(([\d.]+)\s*/\s*[\d.]+\))?")


def broker_figures(messages: int, repeat: int) -> list[Figure]:
    """bench/broker.py's scenarios: messages per second and the broker's
    CPU time per message, on both brokers."""
    command = f"python bench/broker.py --messages {messages} --repeat {repeat}"
    figures: dict[tuple[str, str], Figure] = {}
    for name, scenario in broker.SCENARIOS.items():
        label = f"1p1c {name}: {scenario.body_size} B{', no-ack' if scenario.no_ack else ', acks'}"
        figures[name, "rate"] = Figure(f"{label}, msg/s", "msg/s", True, f"{command} --scenario {name}")
        figures[name, "cpu"] = Figure(f"{label}, broker CPU us/msg", "us", False, f"{command} --scenario {name}")
    with tempfile.TemporaryDirectory(prefix="bench-compare-") as base_dir:
        with broker.running_brokers(base_dir, None) as brokers:
            for result in broker.compare(brokers, list(broker.SCENARIOS.values()), messages, 5000, repeat):
                figures[result.scenario, "rate"].values[result.broker] = result.rate
                figures[result.scenario, "cpu"].values[result.broker] = result.cpu_us_per_message
    return list(figures.values())


def script_output(script: str, *arguments: str) -> Optional[str]:
    """The standard output of bench/*script* run with *arguments*, or None
    (with the reason on standard error) when it failed."""
    process = subprocess.run(
        [sys.executable, os.path.join(BENCH, script), *arguments],
        cwd=BENCH, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    if process.returncode:
        print(f"bench/{script} failed (status {process.returncode}):\n{process.stderr[-2000:]}", file=sys.stderr)
        return None
    return process.stdout


def rows(output: str) -> list[tuple[str, str, list[tuple[float, Optional[float]]]]]:
    """The broker rows of a report: (label before the broker's name, broker,
    cells). A cell is a number, or ``rate (broker CPU / other CPU)`` as
    bench/spark.py prints them: (the number, the broker's CPU or None)."""
    found = []
    for line in output.splitlines():
        parts = line.split()
        for index, part in enumerate(parts[:2]):
            if part in ("txamqp09", "rabbitmq"):
                rest = " ".join(parts[index + 1 :])
                cells = [
                    (float(number.replace(",", "")), float(cpu) if cpu else None)
                    for number, cpu in _CELL.findall(rest)
                ]
                if cells and _CELL.sub("", rest).strip() == "":
                    found.append((" ".join(parts[:index]), part, cells))
                break
    return found


def streams_figures(messages: int) -> list[Figure]:
    """bench/streams.py's phases (rows: phase, broker, msg/s, CPU us/msg, RSS)."""
    command = f"python bench/streams.py --messages {messages}"
    figures: dict[tuple[str, str], Figure] = {}
    for phase in ("append", "read"):
        label = f"stream {phase}: 256 B{', confirmed' if phase == 'append' else ', acked'}"
        figures[phase, "rate"] = Figure(f"{label}, msg/s", "msg/s", True, command)
        figures[phase, "cpu"] = Figure(f"{label}, broker CPU us/msg", "us", False, command)
    for phase, name, cells in rows(script_output("streams.py", "--messages", str(messages)) or ""):
        if (phase, "rate") in figures and len(cells) >= 2:
            figures[phase, "rate"].values[name] = cells[0][0]
            figures[phase, "cpu"].values[name] = cells[1][0]
    return list(figures.values())


def spark_figures(messages: int) -> list[Figure]:
    """bench/spark.py's actions (rows: broker, then per action its rate and
    the CPU per message of the broker and of Spark)."""
    command = f"python bench/spark.py --messages {messages}"
    actions = ("write", "read classic", "read stream")
    rates = [Figure(f"Spark local[2] {action}: 100 B, msg/s", "msg/s", True, command) for action in actions]
    cpus = [Figure(f"Spark local[2] {action}: broker CPU us/msg", "us", False, command) for action in actions]
    for _label, name, cells in rows(script_output("spark.py", "--messages", str(messages)) or ""):
        for rate, cpu, (value, broker_us) in zip(rates, cpus, cells):
            rate.values[name] = value
            if broker_us is not None:
                cpu.values[name] = broker_us
    return rates + [cpu for cpu in cpus if cpu.values]


def table(figures: list[Figure]) -> str:
    """A reStructuredText table of *figures*."""
    header = ("scenario", "txamqp09", "RabbitMQ", "ratio", "command")
    lines = [
        (
            figure.scenario,
            _value(figure.values.get("txamqp09")),
            _value(figure.values.get("rabbitmq")),
            "" if figure.ratio is None else f"{figure.ratio:.2f}",
            figure.command,
        )
        for figure in figures
    ]
    widths = [max(len(row[column]) for row in [header, *lines]) for column in range(len(header))]
    rule = "  ".join("=" * width for width in widths)

    def line(row: tuple[str, ...]) -> str:
        return "  ".join(
            cell.rjust(width) if 0 < column < 4 else cell.ljust(width)
            for column, (cell, width) in enumerate(zip(row, widths))
        ).rstrip()

    return "\n".join([rule, line(header), rule, *map(line, lines), rule])


def _value(value: Optional[float]) -> str:
    if value is None:
        return "n/a"
    return f"{value:,.2f}" if value < 10 else f"{value:,.1f}" if value < 100 else f"{value:,.0f}"


def main(argv: Optional[list[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes everywhere")
    parser.add_argument("--skip", choices=GROUPS, action="append", default=[], help="leave a group out")
    parser.add_argument("--repeat", type=int, default=3, help="runs of bench/broker.py's scenarios")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON, not the table")
    options = parser.parse_args(argv)
    sizes = QUICK if options.quick else Options()
    figures: list[Figure] = []
    if "broker" not in options.skip:
        figures += broker_figures(50_000 if options.quick else 300_000, 1 if options.quick else options.repeat)
    if "scale" not in options.skip:
        command = "python bench/scale.py" + (
            "".join(f" --{name.replace('_', '-')} {value}" for name, value in vars(sizes).items())
            if options.quick else ""
        )
        figures += scale.run(scale.brokers(None), list(scale.SCENARIOS), sizes, command)
    if "streams" not in options.skip:
        figures += streams_figures(20_000 if options.quick else 100_000)
    if "spark" not in options.skip:
        figures += spark_figures(20_000 if options.quick else 100_000)
    if options.json:
        print(json.dumps([{**vars(figure), "ratio": figure.ratio} for figure in figures]))
        return
    print(table(figures))
    print(f"\nratio > 1: txamqp09 does better; load average {scale.load()} (1, 5, 15 min)")


if __name__ == "__main__":
    main()
