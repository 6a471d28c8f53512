#!/usr/bin/env python3
"""Writes tests/trainer/fixtures/tensorboard_records.txt, the reference bytes that
tests/trainer/tensorboard_writer_test.cc compares Conveyor's event writer with.

Made by TensorBoard's own code (the PyPI `tensorboard` package): its RecordWriter frames
payloads (length, masked CRC32C of the length, data, masked CRC32C of the data), and
its Event proto serialises events, so the test needs neither Python nor TensorBoard.

    pip install tensorboard        # tools/setup.sh installs it
    python3 tools/gen_tensorboard_fixtures.py

Lines: "record <payload hex> <framed hex>" and
"event <wall_time> <step> <tag|-> <value|file_version> <serialised hex>".
"""
import io
import os

import tensorboard
from tensorboard.compat.proto import event_pb2, summary_pb2
from tensorboard.summary.writer.record_writer import RecordWriter

PAYLOADS = [b"", b"a", b"brain.Event:2", bytes(range(256)) * 2]
SCALARS = [(1.5, 7, "lm loss", 2.25), (1796147436.25, 123456789, "lm loss vs samples", -0.1),
           (0.0, 0, "grad-norm", 3.0e38)]


def framed(payload):
    out = io.BytesIO()
    RecordWriter(out).write(payload)
    return out.getvalue()


def main():
    path = os.path.join(os.path.dirname(__file__), "..", "tests", "trainer", "fixtures",
                        "tensorboard_records.txt")
    lines = [f"# made by tools/gen_tensorboard_fixtures.py with tensorboard {tensorboard.__version__}"]
    for p in PAYLOADS:
        lines.append(f"record {p.hex() or '-'} {framed(p).hex()}")
    version = event_pb2.Event(wall_time=1.5, file_version="brain.Event:2")
    lines.append(f"event 1.5 0 - brain.Event:2 {version.SerializeToString().hex()}")
    for wall_time, step, tag, value in SCALARS:
        event = event_pb2.Event(wall_time=wall_time, step=step, summary=summary_pb2.Summary(
            value=[summary_pb2.Summary.Value(tag=tag, simple_value=value)]))
        lines.append(f"event {wall_time!r} {step} {tag.replace(' ', '_')} {value!r} "
                     f"{event.SerializeToString().hex()}")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
