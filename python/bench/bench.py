#!/usr/bin/python3
"""Throughput of the data and ML side (BENCHMARK.md "Python package and export"), on a store that
scripts/bench-python.sh fills. Every comparison runs its sides interleaved in this one run
(A, B, A, B, ...; the median of each), because the machine is shared and noisy.

usage: bench.py --cli build/tools/dejaview --work DIR [--repeats 3]
"""
import argparse
import os
import re
import resource
import shutil
import statistics
import subprocess
import tempfile
import time

import numpy as np
import torch
import torch.utils.data

import dejaview
from dejaview.torch import FrameDataset, collate_frames


def timed(fn):
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def cpu_seconds():
    """CPU time of this process and of its children that have ended (export processes,
    DataLoader workers)."""
    return sum(r.ru_utime + r.ru_stime for r in (resource.getrusage(resource.RUSAGE_SELF),
                                                 resource.getrusage(resource.RUSAGE_CHILDREN)))


def busy_seconds():
    """CPU seconds every process on the machine has run (/proc/stat: all but idle and iowait)."""
    with open("/proc/stat") as f:
        fields = [int(v) for v in f.readline().split()[1:]]
    return (sum(fields) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")


def interleaved(repeats, **sides):
    """{name: (median value, median cores used, median CPU seconds, median cores others used)}
    running each side once per round, in turn. Cores used = CPU seconds of the run / its wall
    seconds: what a side got of the machine; cores others used = what the rest of the machine ran
    meanwhile (0 on a quiet machine)."""
    out = {name: [] for name in sides}
    for _ in range(repeats):
        for name, fn in sides.items():
            cpu, busy, wall = cpu_seconds(), busy_seconds(), time.perf_counter()
            value = fn()
            wall = time.perf_counter() - wall
            cpu = cpu_seconds() - cpu
            others = max(0.0, busy_seconds() - busy - cpu) / wall
            out[name].append((value, cpu / wall, cpu, others))
    return {name: tuple(statistics.median(c) for c in zip(*v)) for name, v in out.items()}


def export_rate(cli, work, threads):
    out = os.path.join(work, f"export-t{threads}")
    shutil.rmtree(out, ignore_errors=True)
    text = subprocess.run([cli, "export", "--store", f"{work}/store", "--maps", f"{work}/maps",
                           "--out", out, "--layout", "packed", "--threads", str(threads)],
                          check=True, capture_output=True, text=True).stdout
    return float(re.search(r"([0-9.]+) frames/s", text).group(1))


def write_atomic(path, data):
    """As the CLI writes each frame (WriteFileAtomic: temporary file, fsync, rename)."""
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.rename(tmp, path)


def cli_decode_s(cli, work, out):
    shutil.rmtree(out, ignore_errors=True)
    seconds, _ = timed(lambda: subprocess.run(
        [cli, "decode", f"{work}/deltas", "--map", f"{work}/map", "--out", out], check=True,
        capture_output=True))
    return seconds


def python_decode_s(work, out):
    """The CLI's work in Python: open the map, decode every file, write each frame's KITTI .bin."""
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)

    def run():
        frames = dejaview.DeltaFolder(f"{work}/deltas", map=f"{work}/map")
        for path, frame in zip(frames.paths, frames):
            # One interleaving copy into the file's rows, as the CLI's EncodeKittiBin makes, and
            # the array written through the buffer protocol (tobytes would copy it again).
            xyzi = np.empty((len(frame), 4), dtype=np.float32)
            xyzi[:, :3] = frame.points
            xyzi[:, 3] = frame.intensity
            write_atomic(os.path.join(out, os.path.basename(path)[:-4] + ".bin"), xyzi)
    return timed(run)[0]


def loader_rate(work, workers, persistent, epochs=2):
    ds = FrameDataset(f"{work}/store", maps=f"{work}/maps", seed=1)
    loader = torch.utils.data.DataLoader(ds, batch_size=4, num_workers=workers,
                                         persistent_workers=persistent, collate_fn=collate_frames)

    def run():
        n = 0
        for epoch in range(epochs):
            ds.set_epoch(epoch)
            n += sum(len(batch) for batch in loader)
        return n
    seconds, n = timed(run)
    return n / seconds


def store_to_tensors(work, tiers, **open_args):
    """Store -> decode -> torch tensors in this process: (frames/s, decoded MB/s, stored MB/s)."""
    store = dejaview.Store(open_args.pop("path", f"{work}/store"), maps=f"{work}/maps", **open_args)
    records = store.query()

    def run():
        out = 0
        for frame in store.read(records, tiers=tiers):
            points = torch.from_numpy(frame.points)
            intensity = torch.from_numpy(frame.intensity)
            out += 4 * (points.numel() + intensity.numel())
        return out
    seconds, decoded = timed(run)
    stored = sum(r.bytes for r in records)
    return len(records) / seconds, decoded / seconds / 1e6, stored / seconds / 1e6


def kitti_to_tensors(folder):
    """The KITTI-layout export read from disk into tensors: (frames/s, MB/s)."""
    paths = sorted(os.path.join(folder, n) for n in os.listdir(folder) if n.endswith(".bin"))

    def run():
        out = 0
        for p in paths:
            xyzi = torch.from_numpy(np.fromfile(p, dtype="<f4").reshape(-1, 4))
            points, intensity = xyzi[:, :3], xyzi[:, 3]
            out += 4 * (points.numel() + intensity.numel())
        return out
    seconds, read = timed(run)
    return len(paths) / seconds, read / seconds / 1e6


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()
    frames = len(dejaview.Store(f"{a.work}/store").query())
    shm = tempfile.mkdtemp(dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
    rows = []

    def note(side, frames, extra=""):
        return (f"{extra}{side[1]:.2f} cores used, {1e3 * side[2] / frames:.1f} CPU ms/frame; "
                f"others {side[3]:.2f} cores")

    e = interleaved(a.repeats, t1=lambda: export_rate(a.cli, a.work, 1),
                    t2=lambda: export_rate(a.cli, a.work, 2))
    rows.append(("`dejaview export --threads 1`, packed", f"{e['t1'][0]:.1f} frames/s",
                 note(e["t1"], frames)))
    rows.append(("`dejaview export --threads 2`, packed", f"{e['t2'][0]:.1f} frames/s",
                 note(e["t2"], frames, f"**{e['t2'][0] / e['t1'][0]:.2f}x** one thread; ")))

    d = interleaved(a.repeats, cli=lambda: cli_decode_s(a.cli, a.work, f"{shm}/cli"),
                    py=lambda: python_decode_s(a.work, f"{shm}/py"))
    rows.append(("C++ CLI `dejaview decode` (tmpfs out)",
                 f"{1e3 * d['cli'][0] / frames:.1f} ms/frame", note(d["cli"], frames)))
    rows.append(("Python `DeltaFolder` decode + the same writes",
                 f"{1e3 * d['py'][0] / frames:.1f} ms/frame",
                 note(d["py"], frames, f"**{d['py'][0] / d['cli'][0]:.3f}x** the CLI's time; ")))

    # Two epochs of every frame; persistent workers keep their store and maps across epochs
    # (set_epoch reaches them), workers created per epoch open them again each epoch.
    epoch_frames = 2 * frames
    w = interleaved(a.repeats, w1=lambda: loader_rate(a.work, 1, True),
                    w2=lambda: loader_rate(a.work, 2, True),
                    n1=lambda: loader_rate(a.work, 1, False),
                    n2=lambda: loader_rate(a.work, 2, False))
    rows.append(("DataLoader, 1 persistent worker (FrameDataset)", f"{w['w1'][0]:.1f} frames/s",
                 note(w["w1"], epoch_frames)))
    rows.append(("DataLoader, 2 persistent workers", f"{w['w2'][0]:.1f} frames/s",
                 note(w["w2"], epoch_frames, f"**{w['w2'][0] / w['w1'][0]:.2f}x** one worker; ")))
    rows.append(("DataLoader, 1 worker created per epoch", f"{w['n1'][0]:.1f} frames/s",
                 note(w["n1"], epoch_frames)))
    rows.append(("DataLoader, 2 workers created per epoch", f"{w['n2'][0]:.1f} frames/s",
                 note(w["n2"], epoch_frames, f"**{w['n2'][0] / w['n1'][0]:.2f}x** one worker; ")))

    kitti = os.path.join(a.work, "export-kitti")
    shutil.rmtree(kitti, ignore_errors=True)
    subprocess.run([a.cli, "export", "--store", f"{a.work}/store", "--maps", f"{a.work}/maps",
                    "--out", kitti, "--layout", "kitti"], check=True, capture_output=True)
    results = {"disk": [], "s3": [], "kitti": []}
    for r in range(a.repeats):
        results["disk"].append(store_to_tensors(a.work, ["disk"]))
        # A training node: an empty disk tier of its own, the bucket and the server's index.
        node = os.path.join(a.work, f"node-{r}")
        os.makedirs(node)
        results["s3"].append(store_to_tensors(a.work, ["remote"], path=node,
                                              config=f"{a.work}/tiers.yaml",
                                              index=f"{a.work}/store-s3/index.sqlite"))
        results["kitti"].append(kitti_to_tensors(os.path.join(kitti, "velodyne")))
    disk = [statistics.median(c) for c in zip(*results["disk"])]
    s3 = [statistics.median(c) for c in zip(*results["s3"])]
    flat = [statistics.median(c) for c in zip(*results["kitti"])]
    rows.append(("store (disk tier) -> decode -> tensors, 1 process",
                 f"{disk[0]:.1f} frames/s", f"{disk[1]:.0f} MB/s decoded from {disk[2]:.1f} MB/s "
                 "stored"))
    rows.append(("store (S3 tier on s3rver, cold node) -> decode -> tensors, 1 process",
                 f"{s3[0]:.1f} frames/s", f"{s3[1]:.0f} MB/s decoded from {s3[2]:.1f} MB/s "
                 "stored"))
    rows.append(("KITTI-layout export on disk -> tensors (page cache warm)",
                 f"{flat[0]:.1f} frames/s", f"{flat[1]:.0f} MB/s read"))
    shutil.rmtree(shm, ignore_errors=True)

    print(f"{frames} frames; {os.cpu_count()} cores; median of {a.repeats} interleaved runs\n")
    print("| what | rate | note |\n|---|---|---|")
    for r in rows:
        print(f"| {r[0]} | {r[1]} | {r[2]} |")


if __name__ == "__main__":
    main()
