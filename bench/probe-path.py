#!/usr/bin/env python3
"""Where the latency probe's round trips beside the stream go (bench/congestion.sh --split).

    probe-path.py FROM_NS TO_NS CLIENT_IN CLIENT_OUT SERVER_IN SERVER_OUT

Each capture argument is `tshark -T fields -e frame.time_epoch -e ip.src -e infiniband.bth.psn`
output of the probe's frames at one veth end of bench/congestion.sh's link:

    client [cgxa] <-> [cgxb] ==mirred==> [cgya] -(CE marker, tbf)-> [cgyb] server

CLIENT_OUT (cgxb): the client's SENDs as its send call hands them to the kernel; SERVER_IN
(cgyb): the same SENDs arriving at the server's interface, past the bottleneck; SERVER_OUT
(cgya): the server's echoes as its send call hands them over; CLIENT_IN (cgxa): the echoes
arriving at the client's interface. Only frames between FROM_NS and TO_NS (the stream's run,
Unix ns, from roce-bw's `probe: the stream ran from` line) count. Each client SEND is paired
with the first echo the server sent after the SEND reached it; a frame sent again counts at
its first copy.

Prints p50 / p90 / p99 / max, in microseconds, of: the forward path (the client's send call,
the bottleneck's queue, up to the server's interface), the server (its interface to its echo
leaving), the reverse path, and wire to wire at the client. What the probe's own round trip
adds to the last is the client process (its send call's frames ahead of the probe, its receive
ring).
"""

import bisect
import sys


def frames(path, src, lo, hi):
    """{psn: first time} of the frames from `src` in `path` within [lo, hi] seconds."""
    out = {}
    with open(path) as f:
        for line in f:
            parts = line.split()
            if len(parts) != 3 or parts[1] != src:
                continue
            t, psn = float(parts[0]), int(parts[2])
            if lo <= t <= hi:
                out.setdefault(psn, t)
    return out


def pct(xs, q):
    return xs[round((len(xs) - 1) * q)] * 1e6


def main():
    if len(sys.argv) != 7:
        sys.exit(__doc__)
    lo, hi = int(sys.argv[1]) / 1e9, int(sys.argv[2]) / 1e9
    client_in, client_out, server_in, server_out = sys.argv[3:7]
    client, server = "10.77.0.2", "10.77.0.1"
    sent = frames(client_out, client, lo, hi)
    arrived = frames(server_in, client, lo, hi)
    echoes_out = frames(server_out, server, lo, hi)
    echoes_in = frames(client_in, server, lo, hi)
    echoes = sorted((t, psn) for psn, t in echoes_out.items() if psn in echoes_in)
    times = [t for t, _ in echoes]
    parts = {"forward": [], "server": [], "reverse": [], "wire to wire": []}
    for psn, t1 in sent.items():
        t2 = arrived.get(psn)
        if t2 is None:
            continue
        i = bisect.bisect_left(times, t2)
        if i == len(echoes):
            continue
        t3, echo = echoes[i]
        t4 = echoes_in[echo]
        parts["forward"].append(t2 - t1)
        parts["server"].append(t3 - t2)
        parts["reverse"].append(t4 - t3)
        parts["wire to wire"].append(t4 - t1)
    n = len(parts["forward"])
    if n == 0:
        sys.exit("probe path: no round trip captured beside the stream")
    print(f"probe path beside the stream ({n} round trips captured), us:")
    for name, xs in parts.items():
        xs.sort()
        print(
            f"  {name:13s} p50 {pct(xs, 0.5):8.1f}  p90 {pct(xs, 0.9):8.1f}  "
            f"p99 {pct(xs, 0.99):8.1f}  max {pct(xs, 1.0):9.1f}"
        )


if __name__ == "__main__":
    main()
