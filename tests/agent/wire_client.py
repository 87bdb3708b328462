#!/usr/bin/env python3
"""A LiDAR driver written from docs/wire.md alone, against the real dejaview-agent.

usage: wire_client.py PATH/TO/dejaview-agent

It binds an XPUB on loopback, starts the agent on a config of its own (the upload endpoint is a
port nobody listens on; the spool lives in a temporary folder), waits for the agent's
subscriptions, publishes frames with their own pose, frames posed from the pose topic, a driver
restart and malformed messages, and checks the agent's /metrics counts exactly; then SIGTERM
and exit code 0. Every wait polls observable state (subscriptions, /metrics, the port file)
with a bounded timeout.
"""
import math
import os
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import urllib.request

import zmq

FRAME_MAGIC = 0x464C5644  # "DVLF"
POSE_MAGIC = 0x53505644  # "DVPS"
INT_UINT16, INT_UINT32, FLOAT32 = 4, 6, 7
FRAME_TOPIC = b"lidar/top/points/"
POSE_TOPIC = b"pose/"
T0_NS = 1_700_000_000_000_000_000
MS_NS = 1_000_000
POINTS = 300
TIMEOUT_S = 60
REASONS = ["truncated", "bad_magic", "bad_version", "bad_flags", "bad_name", "too_large",
           "bad_field_table", "bad_lz4", "trailing_bytes", "bad_pose", "not_mappable",
           "wrong_shape", "unknown_topic"]


def rotation_z(theta, t, digits=None):
    """T_map_sensor as 12 doubles (3x4 row-major); digits: print R with that many significant
    digits, as a text pose file would."""
    c, s = math.cos(theta), math.sin(theta)
    r = [[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]]
    if digits:
        r = [[float("%.*e" % (digits - 1, v)) for v in row] for row in r]
    return [r[0][0], r[0][1], r[0][2], t[0], r[1][0], r[1][1], r[1][2], t[1],
            r[2][0], r[2][1], r[2][2], t[2]]


def pose_section(t12):
    covariance = [0.0] * 36
    for i in range(6):
        covariance[i * 7] = 0.01
    return struct.pack("<12d", *t12) + struct.pack("<36d", *covariance)


def pose_body(stamp_ns, t12):
    body = struct.pack("<IBBHq", POSE_MAGIC, 1, 0, 0, stamp_ns) + pose_section(t12)
    assert len(body) == 400
    return body


def scatter(seq, p):
    h = (p * 2654435761 ^ (seq * 40503 + 17)) & 0xFFFFFFFF
    return (h % 4001) * 0.01, ((h >> 12) % 3001) * 0.01, (h % 97) * 0.02


def kitti_layout(seq):
    """x y z intensity float32, stride 16 (dejaview's own layout)."""
    fields = [(b"x", 0, FLOAT32), (b"y", 4, FLOAT32), (b"z", 8, FLOAT32),
              (b"intensity", 12, FLOAT32)]
    points = b"".join(struct.pack("<4f", *scatter(seq, p), (p % 8) / 8.0) for p in range(POINTS))
    return fields, 16, points


def ouster_layout(seq):
    """x y z float32, UINT16 intensity (divided by 65535), ring, UINT32 t in ns; stride 20."""
    fields = [(b"x", 0, FLOAT32), (b"y", 4, FLOAT32), (b"z", 8, FLOAT32),
              (b"intensity", 12, INT_UINT16), (b"ring", 14, INT_UINT16), (b"t", 16, INT_UINT32)]
    points = b"".join(
        struct.pack("<3fHHI", *scatter(seq, p), (p * 997) % 65536, p % 64, p * 300)
        for p in range(POINTS))
    return fields, 20, points


def frame_body(seq, stamp_ns, layout, pose=None, magic=FRAME_MAGIC):
    fields, stride, points = layout(seq)
    frame_id = b"os_sensor"
    body = struct.pack("<IBBHQqq", magic, 1, 0, 1 if pose else 0, seq, stamp_ns,
                       time.time_ns())
    body += struct.pack("<B", len(frame_id)) + frame_id
    if pose:
        body += pose_section(pose)
    body += struct.pack("<IIB", len(points) // stride, stride, len(fields))
    for name, offset, datatype in fields:
        body += struct.pack("<B", len(name)) + name + struct.pack("<IBI", offset, datatype, 1)
    return body + points


def metrics(port):
    with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=5) as r:
        text = r.read().decode()
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            out[name] = float(value)
    return out


def wait_until(what, cond):
    end = time.monotonic() + TIMEOUT_S
    while time.monotonic() < end:
        if cond():
            return
        time.sleep(0.02)
    if not cond():
        raise AssertionError("timed out waiting for " + what)


class Driver:
    def __init__(self):
        self.ctx = zmq.Context()
        self.pub = self.ctx.socket(zmq.XPUB)
        self.pub.setsockopt(zmq.LINGER, 0)
        self.pub.setsockopt(zmq.XPUB_VERBOSE, 1)
        self.pub.bind("tcp://127.0.0.1:0")
        self.endpoint = self.pub.getsockopt(zmq.LAST_ENDPOINT).decode()
        self.subscribed = set()

    def wait_subscribed(self, topics):
        """The slow-joiner rule: publish only once the agent's subscriptions have arrived."""
        def arrived():
            while self.pub.poll(0):
                msg = self.pub.recv()
                if msg[:1] == b"\x01":
                    self.subscribed.add(msg[1:])
            return set(topics) <= self.subscribed
        wait_until("the agent's subscriptions", arrived)

    def send(self, *parts):
        self.pub.send_multipart(list(parts))


def main():
    agent_bin = sys.argv[1]
    with tempfile.TemporaryDirectory(prefix="wire_client.") as tmp:
        driver = Driver()
        # An upload endpoint nobody listens on: a bound, never listening, port.
        nobody = socket.socket()
        nobody.bind(("127.0.0.1", 0))
        config = os.path.join(tmp, "agent.yaml")
        with open(config, "w") as f:
            f.write('vehicle: veh-wire-py\n'
                    'sensors: [{id: 0, topic: "lidar/top/points/"}]\n'
                    'lidar_endpoint: "%s"\n'
                    'pose_topic: "pose/"\n'
                    'pose_max_gap_ms: 500\n'
                    'queue_frames: 8\n'
                    'spool: {dir: "%s/spool"}\n'
                    'upload: {endpoint: "tcp://127.0.0.1:%d"}\n'
                    'metrics_listen: "127.0.0.1:0"\n'
                    % (driver.endpoint, tmp, nobody.getsockname()[1]))
        port_file = os.path.join(tmp, "metrics.port")
        log = open(os.path.join(tmp, "agent.log"), "w")
        agent = subprocess.Popen([agent_bin, "--config", config, "--metrics-port-file", port_file],
                                 stdout=log, stderr=subprocess.STDOUT)
        try:
            run(driver, agent, port_file)
        except BaseException:
            if agent.poll() is None:
                agent.kill()
                agent.wait()
            log.close()
            with open(os.path.join(tmp, "agent.log")) as f:
                sys.stderr.write("--- agent log ---\n" + f.read())
            raise
        log.close()
    print("wire_client: ok")


def run(driver, agent, port_file):
    wait_until("the metrics port file",
               lambda: os.path.exists(port_file) and open(port_file).read().strip())
    port = int(open(port_file).read())
    driver.wait_subscribed([FRAME_TOPIC, POSE_TOPIC])
    m = lambda: metrics(port)
    counter = lambda name: m().get("dejaview_agent_%s_total" % name, -1)

    # 1. Frames carrying their own pose; one rotation printed with 6 significant digits.
    for seq in range(5):
        pose = rotation_z(0.1 * seq, (seq, 0.0, 0.0), digits=6 if seq == 3 else None)
        driver.send(FRAME_TOPIC, frame_body(seq, T0_NS + seq * 100 * MS_NS, kitti_layout, pose))
    wait_until("5 frames encoded", lambda: counter("frames_encoded") == 5)

    # 2. Frames posed from the pose topic: poses first (so that no frame waits), then frames at
    #    an exact sample and between samples 100 ms apart, then one inside a 1000 ms gap (wider
    #    than pose_max_gap_ms: coded intra and counted, not dropped).
    for ms in (1000, 1100, 1200, 1300):
        driver.send(POSE_TOPIC, pose_body(T0_NS + ms * MS_NS, rotation_z(0.001 * ms, (ms, 0, 0))))
    for seq, ms in ((5, 1000), (6, 1050), (7, 1250)):
        driver.send(FRAME_TOPIC, frame_body(seq, T0_NS + ms * MS_NS, ouster_layout))
    for ms in (2000, 3000):
        driver.send(POSE_TOPIC, pose_body(T0_NS + ms * MS_NS, rotation_z(0.0, (ms, 0, 0))))
    driver.send(FRAME_TOPIC, frame_body(8, T0_NS + 2500 * MS_NS, ouster_layout))
    wait_until("9 frames encoded", lambda: counter("frames_encoded") == 9)

    # 3. A restarted driver: its sequence starts again at 0 (a new source epoch).
    driver.send(FRAME_TOPIC, frame_body(0, T0_NS + 4000 * MS_NS, kitti_layout,
                                        rotation_z(0, (0, 0, 0))))
    wait_until("10 frames encoded", lambda: counter("frames_encoded") == 10)

    # 4. Malformed messages; each is counted by reason and the agent carries on.
    good = frame_body(1, T0_NS + 4100 * MS_NS, kitti_layout, rotation_z(0, (0, 0, 0)))
    scaled = [v * 1.001 if i % 4 != 3 else v for i, v in enumerate(rotation_z(0.2, (0, 0, 0)))]
    driver.send(FRAME_TOPIC, good, b"extra")  # three frames
    driver.send(FRAME_TOPIC)  # one frame
    driver.send(FRAME_TOPIC, frame_body(1, T0_NS, kitti_layout, magic=0x12345678))
    driver.send(FRAME_TOPIC, pose_body(T0_NS, rotation_z(0, (0, 0, 0))))  # DVPS on a frame topic
    driver.send(b"lidar/top/points/extra/", good)  # only a prefix of it is subscribed
    driver.send(FRAME_TOPIC, frame_body(1, T0_NS, kitti_layout, scaled))  # not a rotation
    driver.send(POSE_TOPIC, pose_body(T0_NS + 5000 * MS_NS, rotation_z(0, (0, 0, 0)))[:399])
    driver.send(FRAME_TOPIC, good)
    want_rejected = {"wrong_shape": 2, "bad_magic": 2, "unknown_topic": 1, "bad_pose": 1,
                     "truncated": 1}
    rejected_total = lambda: sum(v for k, v in m().items()
                                 if k.startswith("dejaview_agent_wire_rejected_total{"))
    wait_until("7 rejections", lambda: rejected_total() == sum(want_rejected.values()))
    wait_until("11 frames encoded", lambda: counter("frames_encoded") == 11)

    got = m()
    expect = {"frames_in": 11, "frames_encoded": 11, "frames_no_pose": 1, "frames_failed": 0,
              "frames_dropped_queue": 0, "source_epochs": 2}
    for name, value in expect.items():
        key = "dejaview_agent_%s_total" % name
        assert got.get(key) == value, "%s: %s, expected %d" % (key, got.get(key), value)
    reasons = {k[len('dejaview_agent_wire_rejected_total{reason="'):-2]: v
               for k, v in got.items() if k.startswith("dejaview_agent_wire_rejected_total{")}
    assert sorted(reasons) == sorted(REASONS), "reasons: %s" % sorted(reasons)
    for reason in REASONS:
        assert reasons[reason] == want_rejected.get(reason, 0), \
            "wire_rejected %s: %s, expected %d" % (reason, reasons[reason],
                                                  want_rejected.get(reason, 0))

    agent.send_signal(signal.SIGTERM)
    rc = agent.wait(timeout=TIMEOUT_S)
    assert rc == 0, "agent exit code %d after SIGTERM" % rc


if __name__ == "__main__":
    main()
