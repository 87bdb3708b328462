"""Fixtures of the Python suite: frames coded and decoded by the real CLI (the C++ reference),
stores filled through the server's ingest (make_store), all in pytest's temporary folders."""
import os
import re
import select
import subprocess
import types

import numpy as np
import pytest

CLI = os.environ["DEJAVIEW_CLI"]
MAKE_STORE = os.environ["DEJAVIEW_MAKE_STORE"]
DATA = os.environ["DEJAVIEW_DATA_DIR"]
FIXTURES = os.environ["DEJAVIEW_FIXTURE_DIR"]
S3RVER = os.environ["DEJAVIEW_S3RVER_JS"]


def run(*args):
    """Runs the dejaview CLI; its stdout. A failure shows everything it printed."""
    p = subprocess.run([CLI, *map(str, args)], capture_output=True, text=True)
    assert p.returncode == 0, f"dejaview {' '.join(map(str, args))}: {p.stdout}{p.stderr}"
    return p.stdout


def make_store(store, vehicle, drive, deltas, tiers=None):
    args = [MAKE_STORE, str(store), vehicle, drive, str(deltas)] + ([str(tiers)] if tiers else [])
    p = subprocess.run(args, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr


def kitti_bin(path):
    """A KITTI .bin as N x 4 float32 (x, y, z, intensity)."""
    return np.fromfile(path, dtype="<f4").reshape(-1, 4)


def xyzi(frame):
    return np.column_stack([frame.points, frame.intensity])


def coded_drive(root, drive, every):
    """The map from every `every`-th frame of drive (published under a maps root), every frame
    coded against it (tolerance 0.1 m), and the C++ decoder's output of those deltas."""
    d = types.SimpleNamespace(drive=drive, map=root / "map", deltas=root / "deltas",
                              decoded=root / "decoded", maps_root=root / "maps")
    run("map", "build", drive, "--out", d.map, "--every", every)
    run("map", "publish", d.map, "--maps-root", d.maps_root)  # maps/<version>/, as the server's
    run("encode", drive, "--map", d.map, "--out", d.deltas, "--tolerance", "0.1")
    run("decode", d.deltas, "--map", d.map, "--out", d.decoded)
    d.names = sorted(n[:-4] for n in os.listdir(d.deltas) if n.endswith(".dvd"))
    return d


@pytest.fixture(scope="session")
def tiny(tmp_path_factory):
    """A six-frame drive in the repository (tests/data/kitti_tiny.bin, every 60th point of a
    KITTI scan, shifted 0.3 m a frame with its pose): always available."""
    root = tmp_path_factory.mktemp("tiny")
    cloud = kitti_bin(os.path.join(FIXTURES, "kitti_tiny.bin"))
    (root / "drive" / "velodyne").mkdir(parents=True)
    poses = []
    for i in range(6):
        frame = cloud.copy()
        frame[:, 0] -= 0.3 * i  # the world stays put while the sensor moves +x
        frame.tofile(root / "drive" / "velodyne" / f"{i:06d}.bin")
        poses.append(f"1 0 0 {0.3 * i:.1f} 0 1 0 0 0 0 1 0")
    (root / "drive" / "poses.txt").write_text("\n".join(poses) + "\n")
    d = coded_drive(root, root / "drive", 2)
    d.store = root / "store"
    make_store(d.store, "veh-tiny", "tiny-0", d.deltas)
    return d


@pytest.fixture(scope="session")
def kitti(tmp_path_factory):
    """KITTI odometry 00 (../shared/data): the map from its even frames, every frame coded."""
    drive = os.path.join(DATA, "kitti-odometry-mini", "00")
    if not os.path.isdir(drive):
        pytest.skip(f"the shared KITTI data is absent ({drive}): ../shared is not beside the "
                    "repository")
    d = coded_drive(tmp_path_factory.mktemp("kitti"), drive, 2)
    d.store = d.deltas.parent / "store"
    make_store(d.store, "veh-kitti", "kitti-00", d.deltas)
    return d


@pytest.fixture(scope="session")
def s3(tmp_path_factory):
    """A real S3 server (s3rver from npm, installed by scripts/install-deps.sh) on an ephemeral
    port with a bucket "fleet"; yields a function writing a tiers YAML with its remote tier."""
    assert os.path.isfile(S3RVER), f"s3rver missing ({S3RVER}): run scripts/install-deps.sh"
    root = tmp_path_factory.mktemp("s3")
    os.environ["AWS_ACCESS_KEY_ID"] = os.environ["AWS_SECRET_ACCESS_KEY"] = "S3RVER"
    server = subprocess.Popen(["node", S3RVER, "-d", str(root / "data"), "-a", "127.0.0.1", "-p",
                               "0", "-s", "--configure-bucket", "fleet"],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    text = b""
    # s3rver prints "S3rver listening on 127.0.0.1:PORT" once it accepts connections.
    while not re.search(rb"listening on 127\.0\.0\.1:(\d+)\s", text):
        ready, _, _ = select.select([server.stdout], [], [], 30)
        chunk = os.read(server.stdout.fileno(), 4096) if ready else b""
        if not chunk:
            server.kill()
            pytest.fail(f"s3rver did not start: {text.decode(errors='replace')}")
        text += chunk
    port = re.search(rb"listening on 127\.0\.0\.1:(\d+)", text).group(1).decode()

    def tiers(name):
        path = root / f"{name}.yaml"
        path.write_text(f'remote: {{endpoint: "http://127.0.0.1:{port}", bucket: fleet, '
                        f'prefix: "{name}/"}}\ncopier: {{idle_ms: 0}}\n')
        return path
    yield tiers
    server.kill()
    server.wait()
