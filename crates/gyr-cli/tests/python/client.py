"""A Python client of a gyr program over its Unix socket, through grpcio as any user has it.

Usage: client.py SOCKET PROTO_DIR OUT_DIR

Generates the stubs from gyr's .proto files into OUT_DIR, then: handshake, read and change
`nbody.dt`, and a short subscription to `energy` events. Prints `ok` when all went well.
"""

import pathlib
import sys

import grpc
from grpc_tools import protoc


def main():
    socket, proto_dir, out_dir = sys.argv[1:4]
    protos = sorted(str(p.relative_to(proto_dir)) for p in pathlib.Path(proto_dir).glob("gyr/v1/*.proto"))
    args = ["protoc", f"-I{proto_dir}", f"-I{protoc_include()}",
            f"--python_out={out_dir}", f"--grpc_python_out={out_dir}", *protos]
    if protoc.main(args) != 0:
        sys.exit(f"cannot generate the stubs from {proto_dir}")
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
        records = 0
        for batch in stream:
            records += sum(len(b.records) for b in batch.blocks)
            if records > 0:
                break
        stream.cancel()
        assert records > 0
    print("ok")


def protoc_include():
    import grpc_tools
    return str(pathlib.Path(grpc_tools.__file__).parent / "_proto")


if __name__ == "__main__":
    main()
