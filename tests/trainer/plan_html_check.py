"""Checks a --plan-html page against the --dry-run text of the same command, and its
rendering by headless Chromium (tests/trainer/plan_html_test.sh).

  plan_html_check.py data PAGE DRY_RUN_TEXT
      the page's embedded JSON holds the text's figures: batch arithmetic, layout,
      schedule and bubble, every cell of the text Gantt chart, the memory table;
  plan_html_check.py render PAGE DOM SCREENSHOT
      Chromium ran the page's script (one SVG rect per compute action in the dumped
      DOM) and the screenshot (PNG) is not blank: it shows the chart's colours.
"""
import json
import re
import struct
import sys
import zlib

failures = []


def fail(message):
    failures.append(message)
    print("FAIL:", message)


def page_data(page_path):
    with open(page_path) as f:
        html = f.read()
    m = re.search(r'<script id="plan-data" type="application/json">(.*?)</script>', html, re.S)
    if not m:
        sys.exit("FAIL: the page has no <script id=\"plan-data\"> block")
    if re.search(r'(src|href)\s*=\s*"(https?:)?//', html):
        fail("the page references a network resource")
    return json.loads(m.group(1))


def size_text(nbytes):
    # trainer/planning/plan.cc prints MiB (or GiB from 1 GiB on) with two decimals.
    mib = 1024.0 * 1024.0
    if nbytes >= 1024 * mib:
        return "%.2f GiB" % (nbytes / (1024 * mib))
    return "%.2f MiB" % (nbytes / mib)


def expect(what, got, want):
    if got != want:
        fail(f"{what}: page {got!r}, --dry-run text {want!r}")


def check_data(page_path, text_path):
    d = page_data(page_path)
    with open(text_path) as f:
        text = f.read()
    m = re.search(r"rank map: world (\d+) = TP (\d+) x PP (\d+) x DP (\d+)", text)
    layout = d["layout"]
    expect("layout", [layout[k] for k in ["world_size", "tensor_parallel", "pipeline_parallel",
                                          "data_parallel"]], [int(x) for x in m.groups()])
    m = re.search(r"plan: global batch (\d+) = K 1 step x M (\d+) micro-batches x DP (\d+) x "
                  r"micro-batch (\d+) \(x seq (\d+) = (\d+) tokens per step\)", text)
    b = d["batch"]
    expect("batch", [b[k] for k in ["global_batch_size", "micro_batches", "data_parallel",
                                    "micro_batch_size", "seq_length", "tokens_per_step"]],
           [int(x) for x in m.groups()])
    m = re.search(r"plan: ([0-9.]+) TFLOP per iteration .*, padded vocabulary (\d+)", text)
    expect("TFLOP", "%.3f" % b["tflop_per_iteration"], m.group(1))
    expect("padded vocabulary", b["padded_vocab"], int(m.group(2)))
    m = re.search(r"plan: schedule (\S+), P (\d+), V (\d+), M (\d+), costs F,B,W = (\S+): "
                  r"bubble ([0-9.]+)% \(formula\), ([0-9.]+)% \(simulated\), makespan (\d+) units",
                  text)
    s = d["schedule"]
    expect("schedule", [s["name"], layout["pipeline_parallel"], layout["virtual_stages"],
                        b["micro_batches"], s["costs"], "%.1f" % (100 * s["bubble_formula"]),
                        "%.1f" % (100 * s["bubble_simulated"]), "%.0f" % s["makespan"]],
           [m.group(1), int(m.group(2)), int(m.group(3)), int(m.group(4)), m.group(5),
            m.group(6), m.group(7), m.group(8)])

    # The text Gantt chart: column k shows the compute action running at k + 0.5.
    rows = re.findall(r"^rank (\d+) +(.*)$", text, re.M)
    if len(rows) != len(d["timeline"]):
        fail(f"{len(rows)} Gantt rows in the text, {len(d['timeline'])} ranks on the page")
    for r, cells in rows:
        cells = cells.split()
        actions = d["timeline"][int(r)]["actions"]
        want = []
        for k in range(len(cells)):
            at = [a["label"] for a in actions if a["start"] <= k + 0.5 < a["end"]]
            want.append(at[0] if at else ".")
        expect(f"Gantt row of rank {r}", want, cells)

    table = re.findall(r"^ +(\d+) +(\d+) +([0-9.]+ [MG]iB) +([0-9.]+ [MG]iB) +([0-9.]+ [MG]iB) +"
                       r"(\d+) +([0-9.]+ [MG]iB) +([0-9.]+ [MG]iB) +([0-9.]+ [MG]iB)$", text, re.M)
    if len(table) != len(d["memory"]):
        fail(f"{len(table)} memory rows in the text, {len(d['memory'])} on the page")
    for row, m in zip(table, d["memory"]):
        got = [str(m["pipeline_rank"]), str(m["parameters"]), size_text(m["weight_bytes"]),
               size_text(m["grad_bytes"]), size_text(m["optimizer_bytes"]), str(m["peak_stashed"]),
               size_text(m["stash_bytes_per_micro_batch"]), size_text(m["activation_bytes"]),
               size_text(m["total_bytes"])]
        expect(f"memory of pipeline rank {row[0]}", got, list(row))
        parts = sum(m[k] for k in ["weight_bytes", "grad_bytes", "optimizer_bytes",
                                   "activation_bytes"])
        expect("total = weights + grads + optimizer + activations", m["total_bytes"], parts)


def png_pixels(path):
    """(width, height, rows of RGB tuples) of an 8-bit RGB or RGBA, non-interlaced PNG."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        sys.exit(f"FAIL: {path} is not a PNG")
    pos, idat = 8, b""
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, color, _, _, interlace = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    if depth != 8 or color not in (2, 6) or interlace:
        sys.exit(f"FAIL: unexpected PNG format depth {depth} color {color} interlace {interlace}")
    bpp = 3 if color == 2 else 4
    raw, stride, rows, prev = zlib.decompress(idat), width * bpp, [], bytearray(width * bpp)
    for y in range(height):
        start = y * (stride + 1)
        kind, line = raw[start], bytearray(raw[start + 1:start + 1 + stride])
        for i in range(stride):  # the PNG specification's five row filters
            a = line[i - bpp] if i >= bpp else 0
            up, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if kind == 1:
                line[i] = (line[i] + a) & 255
            elif kind == 2:
                line[i] = (line[i] + up) & 255
            elif kind == 3:
                line[i] = (line[i] + (a + up) // 2) & 255
            elif kind == 4:
                p = a + up - c
                pa, pb, pc = abs(p - a), abs(p - up), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else up if pb <= pc else c)) & 255
        rows.append([tuple(line[x * bpp:x * bpp + 3]) for x in range(width)])
        prev = line
    return width, height, rows


def check_render(page_path, dom_path, png_path):
    d = page_data(page_path)
    with open(dom_path) as f:
        dom = f.read()
    actions = sum(len(r["actions"]) for r in d["timeline"])
    drawn = len(re.findall(r'<rect class="action"', dom))
    expect("SVG rects of compute actions in Chromium's DOM", drawn, actions)
    drawn_bars = len(re.findall(r'<rect class="memory"', dom))
    expect("SVG rects of the memory bars", drawn_bars, 4 * len(d["memory"]))
    _, _, rows = png_pixels(png_path)
    counts = {}
    for row in rows:
        for px in row:
            counts[px] = counts.get(px, 0) + 1
    # The forward, backward and weights colours of the page (#4e79a7, #59a14f).
    for name, rgb in [("forward", (0x4e, 0x79, 0xa7)), ("backward", (0x59, 0xa1, 0x4f))]:
        if counts.get(rgb, 0) < 100:
            fail(f"the screenshot shows {counts.get(rgb, 0)} pixels of the {name} colour {rgb}")
    if len(counts) < 20:
        fail(f"the screenshot has {len(counts)} colours: blank")
    print(f"rendered: {drawn} action rects, {len(counts)} colours in the screenshot")


if __name__ == "__main__":
    {"data": check_data, "render": check_render}[sys.argv[1]](*sys.argv[2:])
    sys.exit(1 if failures else 0)
