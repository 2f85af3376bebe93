"""Checks a Perfetto trace written by `gyr trace export --format perfetto`, decoding it with the
descriptors Perfetto publishes (PyPI `perfetto`: perfetto_trace_pb2), not with gyr's own code.

Usage: perfetto_check.py TRACE [--processes N] [--thread NAME]... [--slice NAME]...
                               [--counter NAME]... [--instant NAME]... [--flows N]

Checks that every packet is on a trusted sequence, that process, thread and counter tracks are
described before use and refer to existing parents, that slices begin and end balanced on every
track, that every flow that ends was started, and that the names asked for are there. Prints a
summary and `ok` when all holds.
"""

import argparse
import collections
import sys

from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb


def fail(msg):
    sys.exit(f"perfetto check failed: {msg}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("trace")
    ap.add_argument("--processes", type=int)
    ap.add_argument("--thread", action="append", default=[])
    ap.add_argument("--slice", action="append", default=[])
    ap.add_argument("--counter", action="append", default=[])
    ap.add_argument("--instant", action="append", default=[])
    ap.add_argument("--flows", type=int, default=0, help="at least this many flows that start and end")
    args = ap.parse_args()

    trace = pb.Trace()
    with open(args.trace, "rb") as f:
        trace.ParseFromString(f.read())

    tracks = {}  # uuid -> descriptor
    processes = {}
    threads = {}
    counters = {}
    depth = collections.Counter()
    slices = collections.Counter()
    instants = collections.Counter()
    counter_values = collections.Counter()
    started, ended, matched = set(), 0, 0
    TE = pb.TrackEvent

    for i, p in enumerate(trace.packet):
        if p.trusted_packet_sequence_id == 0:
            fail(f"packet {i} has no trusted_packet_sequence_id")
        if p.HasField("track_descriptor"):
            d = p.track_descriptor
            if d.uuid == 0:
                fail(f"packet {i}: a track descriptor without uuid")
            if d.HasField("parent_uuid") and d.parent_uuid not in tracks:
                fail(f"packet {i}: track {d.uuid} names parent {d.parent_uuid}, never described")
            tracks[d.uuid] = d
            if d.HasField("process"):
                if d.process.pid == 0 and not d.process.process_name:
                    fail(f"packet {i}: a process track without pid or name")
                processes[d.uuid] = d.process
            if d.HasField("thread"):
                t = d.thread
                if not t.thread_name or t.tid == 0:
                    fail(f"packet {i}: a thread track without name or tid: {t}")
                parent = tracks[d.parent_uuid]
                if not parent.HasField("process") or parent.process.pid != t.pid:
                    fail(f"packet {i}: thread {t.thread_name} is not under its process {t.pid}")
                threads[d.uuid] = t
            if d.HasField("counter"):
                counters[d.uuid] = d.name
        if p.HasField("track_event"):
            e = p.track_event
            if not p.HasField("timestamp"):
                fail(f"packet {i}: a track event without timestamp")
            if e.track_uuid not in tracks:
                fail(f"packet {i}: an event on track {e.track_uuid}, never described")
            if e.type == TE.TYPE_SLICE_BEGIN:
                if not e.name:
                    fail(f"packet {i}: a slice without a name")
                depth[e.track_uuid] += 1
                slices[e.name] += 1
            elif e.type == TE.TYPE_SLICE_END:
                depth[e.track_uuid] -= 1
                if depth[e.track_uuid] < 0:
                    fail(f"packet {i}: a slice ends on track {e.track_uuid} with none open")
            elif e.type == TE.TYPE_INSTANT:
                instants[e.name] += 1
            elif e.type == TE.TYPE_COUNTER:
                if e.track_uuid not in counters:
                    fail(f"packet {i}: a counter value on a track that is not a counter")
                if not (e.HasField("counter_value") or e.HasField("double_counter_value")):
                    fail(f"packet {i}: a counter event without a value")
                counter_values[counters[e.track_uuid]] += 1
            else:
                fail(f"packet {i}: event type {e.type}")
            for f in e.flow_ids:
                started.add(f)
            for f in e.terminating_flow_ids:
                ended += 1
                if f in started:
                    matched += 1
    # Every flow that ends is started somewhere (packets are not in time order).
    all_started = {f for p in trace.packet for f in p.track_event.flow_ids}
    for i, p in enumerate(trace.packet):
        for f in p.track_event.terminating_flow_ids:
            if f not in all_started:
                fail(f"packet {i}: flow {f:#x} ends but never starts")

    open_tracks = {u: n for u, n in depth.items() if n != 0}
    if open_tracks:
        fail(f"slices left open: {open_tracks}")
    if args.processes is not None and len(processes) != args.processes:
        fail(f"{len(processes)} processes, expected {args.processes}")
    names = {t.thread_name for t in threads.values()}
    for want in args.thread:
        if want not in names:
            fail(f"no thread named {want!r}; threads: {sorted(names)}")
    for want in args.slice:
        if slices[want] == 0:
            fail(f"no slice named {want!r}; slices: {sorted(slices)}")
    for want in args.counter:
        if counter_values[want] == 0:
            fail(f"no values of counter {want!r}; counters: {sorted(counter_values)}")
    for want in args.instant:
        if instants[want] == 0:
            fail(f"no instant named {want!r}; instants: {sorted(instants)[:40]}")
    all_ended = sum(len(p.track_event.terminating_flow_ids) for p in trace.packet)
    if all_ended < args.flows:
        fail(f"{all_ended} flows end, expected at least {args.flows}")
    print(
        f"{len(trace.packet)} packets: {len(processes)} processes, {len(threads)} threads, "
        f"{len(counters)} counters ({sum(counter_values.values())} values), "
        f"{sum(slices.values())} slices, {sum(instants.values())} instants, "
        f"{len(all_started)} flows started, {all_ended} ended"
    )
    print("ok")


if __name__ == "__main__":
    main()
