#!/bin/sh
# Screenshots of `mlcc report` for docs/: docs/report_gpt2_tiny.png and docs/report_resnet50.png.
#
#   tools/make_report_screenshots.sh            (from the repository root)
#
# Needs chromium (Debian: apt-get install -y chromium) and mlcc's Python (PYTHON, default /tmp/venv/bin/python,
# else python3). Compiles both models without GPU targets, writes their reports, screenshots each whole page
# in headless chromium, trims the empty bottom and writes the PNGs (each checked to stay under 1 MB).
set -eu
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-/tmp/venv/bin/python}
[ -x "$PYTHON" ] || PYTHON=python3
command -v chromium >/dev/null || { echo "chromium not found (apt-get install -y chromium)" >&2; exit 1; }
exec "$PYTHON" - "$@" <<'EOF'
import os
import struct
import subprocess
import sys
import tempfile
import zlib
from pathlib import Path

import numpy as np
import onnx

import mlcc
from mlcc.report import write_report

ROOT = Path.cwd()
SHARED = Path(os.environ.get("MLCC_SHARED_MODELS", ROOT.parent / "shared" / "models"))
MODELS = {
    "gpt2_tiny": SHARED / "gpt2_tiny.onnx",
    "resnet50": Path(onnx.__file__).parent / "backend" / "test" / "data" / "light" / "light_resnet50.onnx",
}
WIDTH, HEIGHT = 1400, 7000   # the window: tall enough for the whole page, trimmed afterwards
LIMIT = 1 << 20


def decode(data: bytes) -> np.ndarray:
    pos, chunks = 8, []
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        if kind == b"IHDR":
            w, h, _, color = struct.unpack(">IIBB", data[pos + 8:pos + 18])
        elif kind == b"IDAT":
            chunks.append(data[pos + 8:pos + 8 + n])
        pos += 12 + n
    bpp = 3 if color == 2 else 4
    raw = np.frombuffer(zlib.decompress(b"".join(chunks)), np.uint8).reshape(h, 1 + w * bpp)
    out = np.zeros((h, w * bpp), np.uint8)
    prev = np.zeros(w * bpp, np.int64)
    for y in range(h):
        f, line = raw[y, 0], raw[y, 1:].astype(np.int64)
        if f == 0:
            cur = line
        elif f == 1:
            cur = np.cumsum(line.reshape(w, bpp), axis=0).reshape(-1) % 256
        elif f == 2:
            cur = (line + prev) % 256
        else:
            vals, up, rec = line.tolist(), prev.tolist(), [0] * len(line)
            for i, v in enumerate(vals):
                a = rec[i - bpp] if i >= bpp else 0
                if f == 3:
                    rec[i] = (v + (a + up[i]) // 2) & 255
                else:
                    c = up[i - bpp] if i >= bpp else 0
                    p = a + up[i] - c
                    pa, pb, pc = abs(p - a), abs(p - up[i]), abs(p - c)
                    rec[i] = (v + (a if pa <= pb and pa <= pc else up[i] if pb <= pc else c)) & 255
            cur = np.asarray(rec, np.int64)
        out[y] = cur
        prev = cur
    return out.reshape(h, w, bpp)[:, :, :3]


def encode(img: np.ndarray) -> bytes:
    """RGB PNG, every row Up-filtered (long runs of page background compress well)."""
    h, w, _ = img.shape
    rows = img.reshape(h, w * 3).astype(np.int16)
    up = np.vstack([rows[:1], (rows[1:] - rows[:-1]) % 256]).astype(np.uint8)
    filt = np.full((h, 1), 2, np.uint8)
    filt[0] = 0
    raw = np.hstack([filt, up]).tobytes()

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b""))


def screenshot(html: Path, png: Path, profile: Path) -> None:
    subprocess.run(["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                    "--disable-background-networking", "--disable-component-update", "--disable-sync",
                    f"--user-data-dir={profile}", "--hide-scrollbars", f"--screenshot={png}",
                    f"--window-size={WIDTH},{HEIGHT}", html.resolve().as_uri()],
                   check=True, capture_output=True, timeout=300)


def main() -> None:
    docs = ROOT / "docs"
    docs.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="mlcc-shots-") as tmp:
        tmp = Path(tmp)
        for name, model in MODELS.items():
            bundle = tmp / name
            mlcc.compile(model, bundle, targets=[])
            html = write_report(bundle, tmp / f"{name}.html")
            shot = tmp / f"{name}.png"
            screenshot(html, shot, tmp / "profile")
            img = decode(shot.read_bytes())
            content = np.where((np.abs(img.astype(int) - img[-1, 0].astype(int)) > 8).any(axis=(1, 2)))[0]
            img = np.ascontiguousarray(img[: content.max() + 24])
            data = encode(img)
            if len(data) > LIMIT:
                sys.exit(f"{name}: screenshot is {len(data):,} bytes, over 1 MB")
            out = docs / f"report_{name}.png"
            out.write_bytes(data)
            print(f"{out}: {img.shape[1]}x{img.shape[0]}, {len(data):,} bytes")


main()
EOF
