"""A Python client of a gyr program over its Unix socket, through grpcio as any user has it.

Usage: client.py SOCKET PROTO_DIR OUT_DIR

Generates the stubs from gyr's .proto files into OUT_DIR, then: handshake, read and change
`nbody.dt`, and a short subscription to `energy` events, decoded with the record layout of
docs/client-guide.md (its decoder, copied) and placed on the wall clock by the stream's
anchor, then another with the server decoding them. Prints `ok` when all went well.
"""

import pathlib
import struct
import sys
import time

import grpc
from grpc_tools import protoc


def main():
    socket, proto_dir, out_dir = sys.argv[1:4]
    protos = sorted(str(p.relative_to(proto_dir)) for p in pathlib.Path(proto_dir).glob("gyr/v1/*.proto"))
    args = ["protoc", f"-I{proto_dir}", f"-I{protoc_include()}",
            f"--python_out={out_dir}", f"--grpc_python_out={out_dir}", *protos]
    if protoc.main(args) != 0:
        sys.exit(f"cannot generate the stubs from {proto_dir}")
    # The stubs' package is `gyr.v1`: made a regular package first on the path, so that the
    # gyr Python package, when installed, does not hide it.
    for package in ["gyr", "gyr/v1"]:
        pathlib.Path(out_dir, package, "__init__.py").touch()
    sys.path.insert(0, out_dir)
    from gyr.v1 import common_pb2, events_pb2, service_pb2, service_pb2_grpc, steer_pb2

    # The default authority over a Unix socket is the percent-encoded path.
    with grpc.insecure_channel(f"unix:{socket}") as channel:
        gyr = service_pb2_grpc.GyrStub(channel)
        hello = gyr.Handshake(service_pb2.HandshakeRequest(protocol_version=1, client="python"), timeout=10)
        assert hello.pid > 0, hello

        def dt():
            reply = gyr.Get(steer_pb2.GetRequest(paths=["nbody.dt"]), timeout=10)
            return reply.values[0].value.float

        assert abs(dt() - 0.001) < 1e-12, dt()
        changed = gyr.Set(steer_pb2.SetRequest(writes=[
            steer_pb2.PathValue(path="nbody.dt", value=common_pb2.Value(text="0.002"))]), timeout=10)
        assert len(changed.changes) == 1, changed
        assert abs(dt() - 0.002) < 1e-12, dt()

        stream = gyr.Subscribe(events_pb2.SubscribeRequest(types=["energy"]), timeout=30)
        schemas, anchor, events = {}, None, []
        for batch in stream:
            if anchor is None:
                assert batch.HasField("anchor"), "the first batch carries a clock anchor"
            if batch.HasField("anchor"):
                anchor = batch.anchor
            schemas.update((s.id, s) for s in batch.schemas)
            for block in batch.blocks:
                events.extend(records(block, schemas))
            if events:
                break
        stream.cancel()
        name, ts, seq, _, values = events[0]
        assert name == "energy" and seq >= 1, events[0]
        assert all(isinstance(v, (int, float)) for v in values.values()), values
        # On the wall clock, the event happened during this test.
        wall = anchor.unix_ns + (ts - anchor.trace_ns)
        assert abs(wall - time.time_ns()) < 600e9, (wall, time.time_ns())

        # The same events decoded by the server, for clients that would rather not.
        stream = gyr.Subscribe(events_pb2.SubscribeRequest(types=["energy"], decoded=True), timeout=30)
        for batch in stream:
            assert not batch.blocks, "decoded batches carry no blocks"
            if batch.events:
                e = batch.events[0]
                break
        stream.cancel()
        assert e.type == "energy" and e.seq >= 1, e
        assert [f.name for f in e.fields] == list(values), (e.fields, values)
    print("ok")


# The decoder of docs/client-guide.md, as written there.
SCALARS = {"i8": "b", "i16": "h", "i32": "i", "i64": "q", "u8": "B", "u16": "H", "u32": "I",
           "u64": "Q", "f32": "f", "f64": "d", "bool": "?"}


def fields(schema, payload):
    """The values of one record's payload, by field name."""
    out, at = {}, 0
    for f in schema.fields:
        t = f.type
        if t in ("string", "bytes"):
            (n,) = struct.unpack_from("<I", payload, at)
            raw = bytes(payload[at + 4:at + 4 + n])
            out[f.name], at = (raw.decode() if t == "string" else raw), at + 4 + n
        elif t.startswith("["):
            elem, n = t[1:-1].split(";")
            code = SCALARS[elem.strip()]
            n = int(n)
            out[f.name] = list(struct.unpack_from(f"<{n}{code}", payload, at))
            at += n * struct.calcsize(code)
        else:
            (out[f.name],) = struct.unpack_from("<" + SCALARS[t], payload, at)
            at += struct.calcsize(SCALARS[t])
    return out


def records(block, schemas):
    """(type name, timestamp ns, seq, perturbation ns, fields) of each record of a RecordBlock."""
    data, at = block.records, 0
    while at + 32 <= len(data):
        length, type_id, ts, seq, pert = struct.unpack_from("<IIQQQ", data, at)
        if length < 32 or at + length > len(data):
            break  # damaged block
        schema = schemas[type_id]
        yield schema.name, ts, seq, pert, fields(schema, data[at + 32:at + length])
        at += (length + 7) & ~7


def protoc_include():
    import grpc_tools
    return str(pathlib.Path(grpc_tools.__file__).parent / "_proto")


if __name__ == "__main__":
    main()
