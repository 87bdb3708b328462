"""Decoding gives the GIL up: two threads decode at once while a third runs Python code.

With the interpreter's forced thread switching turned off (a switch interval far longer than the
test), a Python thread runs only where the thread holding the GIL gives it up. So another thread
running between a decode's call and its return (a counter it advances, a second decoder entering
decode) is proof that decode released the GIL, and can never happen if it held it: that case
fails every time, it is not a matter of timing.
"""
import os
import sys
import threading

import pytest

import dejaview

# Decodes per thread at most; each one is a chance for the other threads to run inside it (taken
# almost always at the first), and a decode that holds the GIL never gives one.
ATTEMPTS = 200


@pytest.fixture
def no_forced_switching():
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1000.0)
    yield
    sys.setswitchinterval(interval)


def run_two_decoders_and_a_counter(decode_a, decode_b):
    """decode_a / decode_b: one decode each call. Returns, per decoder, how many of its decodes
    saw the counter advance, and how many times a decoder entered decode while the other was in
    it."""
    count = [0]
    inside = [0]
    both_inside = [0]
    advanced = [0, 0]
    start = threading.Barrier(3)
    done = [threading.Event(), threading.Event()]

    def decoder(i, decode):
        start.wait()
        for _ in range(ATTEMPTS):
            inside[0] += 1
            if inside[0] == 2:
                both_inside[0] += 1
            before = count[0]
            decode()
            if count[0] != before:
                advanced[i] += 1
            inside[0] -= 1
            if advanced[i] and both_inside[0]:
                break
        done[i].set()

    threads = [threading.Thread(target=decoder, args=(0, decode_a)),
               threading.Thread(target=decoder, args=(1, decode_b))]
    for t in threads:
        t.start()
    start.wait()
    # The third thread (this one) counts until both decoders are done, giving the GIL up after
    # each step (os.sched_yield releases it; it waits for nothing).
    while not (done[0].is_set() and done[1].is_set()):
        count[0] += 1
        os.sched_yield()
    for t in threads:
        t.join()
    return advanced, both_inside[0]


def test_decoder_decode_releases_the_gil(tiny, no_forced_switching):
    payload = (tiny.deltas / f"{tiny.names[-1]}.dvd").read_bytes()
    a, b = dejaview.Decoder(tiny.map), dejaview.Decoder(tiny.map)
    assert len(a.decode(payload)) > 0
    advanced, both_inside = run_two_decoders_and_a_counter(lambda: a.decode(payload),
                                                           lambda: b.decode(payload))
    assert advanced[0] > 0 and advanced[1] > 0
    assert both_inside > 0


def test_store_reader_releases_the_gil(tiny, no_forced_switching):
    # The DataLoader's path: frames read through the store's reader and decoded in next().
    stores = [dejaview.Store(str(tiny.store), maps=str(tiny.maps_root)) for _ in range(2)]
    records = stores[0].query()
    readers = [iter(s.read(records * ATTEMPTS)) for s in stores]
    advanced, both_inside = run_two_decoders_and_a_counter(lambda: next(readers[0]),
                                                           lambda: next(readers[1]))
    assert advanced[0] > 0 and advanced[1] > 0
    assert both_inside > 0
