"""A client that has nothing of gyr's: grpcio, its health checker and its reflection client.

Usage: standard.py TARGET TOKEN

TARGET is a grpcio target (`unix:/path/to/PID.sock`, or `127.0.0.1:PORT`); TOKEN is the steer
token to send as `authorization: Bearer TOKEN`, or `-` for none (the Unix socket).

Checks that `grpc.health.v1` says SERVING for the server and for `gyr.v1.Gyr` (with no token
too), that server reflection lists the services (and, where a token is asked for, refuses a
caller without one), then builds the handshake's messages from the reflected descriptors
alone and sees a handshake without a protocol version refused with what to send, and one
with it taken. Prints `ok` when all went well.
"""

import sys

import grpc
from google.protobuf import descriptor_pool
from google.protobuf.message_factory import GetMessageClass
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import (
    ProtoReflectionDescriptorDatabase,
)


class Bearer(
    grpc.UnaryUnaryClientInterceptor,
    grpc.UnaryStreamClientInterceptor,
    grpc.StreamUnaryClientInterceptor,
    grpc.StreamStreamClientInterceptor,
):
    """Adds `authorization: Bearer TOKEN` to every call (reflection's stream included)."""

    def __init__(self, token):
        self.header = ("authorization", f"Bearer {token}")

    def _details(self, d):
        metadata = list(d.metadata or []) + [self.header]
        return Details(d, metadata)

    def intercept_unary_unary(self, cont, d, request):
        return cont(self._details(d), request)

    def intercept_unary_stream(self, cont, d, request):
        return cont(self._details(d), request)

    def intercept_stream_unary(self, cont, d, requests):
        return cont(self._details(d), requests)

    def intercept_stream_stream(self, cont, d, requests):
        return cont(self._details(d), requests)


class Details(grpc.ClientCallDetails):
    """The call's details with other metadata."""

    def __init__(self, d, metadata):
        self.method = d.method
        self.timeout = d.timeout
        self.metadata = metadata
        self.credentials = d.credentials
        self.wait_for_ready = getattr(d, "wait_for_ready", None)
        self.compression = getattr(d, "compression", None)


def check_health(channel):
    health = health_pb2_grpc.HealthStub(channel)
    for service in ["", "gyr.v1.Gyr"]:
        reply = health.Check(health_pb2.HealthCheckRequest(service=service), timeout=10)
        assert reply.status == health_pb2.HealthCheckResponse.SERVING, (service, reply)


def main():
    target, token = sys.argv[1:3]
    with grpc.insecure_channel(target) as bare:
        # Health answers anyone: probes often cannot send a header.
        check_health(bare)
        if token != "-":
            # Reflection is a reading call: without a token it is refused.
            try:
                ProtoReflectionDescriptorDatabase(bare).get_services()
                raise AssertionError("reflection answered a caller without a token")
            except grpc.RpcError as e:
                assert e.code() == grpc.StatusCode.UNAUTHENTICATED, e

        channel = bare if token == "-" else grpc.intercept_channel(bare, Bearer(token))
        check_health(channel)
        db = ProtoReflectionDescriptorDatabase(channel)
        services = set(db.get_services())
        for s in ["gyr.v1.Gyr", "grpc.health.v1.Health"]:
            assert s in services, services

        # The API from reflection alone: no .proto file, no generated stub.
        pool = descriptor_pool.DescriptorPool(db)
        gyr = pool.FindServiceByName("gyr.v1.Gyr")
        method = gyr.methods_by_name["Handshake"]
        Request = GetMessageClass(method.input_type)
        Reply = GetMessageClass(method.output_type)
        handshake = channel.unary_unary(
            "/gyr.v1.Gyr/Handshake",
            request_serializer=Request.SerializeToString,
            response_deserializer=Reply.FromString,
        )
        try:
            handshake(Request(client="standard.py"), timeout=10)
            raise AssertionError("a handshake without a protocol version was taken")
        except grpc.RpcError as e:
            assert e.code() == grpc.StatusCode.FAILED_PRECONDITION, e
            assert "set protocol_version = 1" in e.details(), e.details()
        hello = handshake(Request(protocol_version=1, client="standard.py"), timeout=10)
        assert hello.pid > 0 and hello.protocol_version == 1 and hello.can_steer, hello
    print("ok")


if __name__ == "__main__":
    main()
