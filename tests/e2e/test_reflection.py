"""gRPC server reflection (issue 43, part 4): grpc.reflection.v1 and v1alpha on the gRPC listener, as grpcurl and
ghz use it. A client that knows no proto file lists the services, fetches the file that holds
RateLimitService with everything it imports, builds the request type from those descriptors alone and calls
ShouldRateLimit with it; unknown names answer NOT_FOUND on a stream that goes on; REFLECTION_ENABLED=false turns
it off."""

import unittest

import grpc
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

import harness
import reflection_pb2
import reflection_v1alpha_pb2
from harness import Sluice
from test_redis import wait_healthy

RULES = """
domain: refl
descriptors:
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 2}
"""
VERSIONS = {'v1': reflection_pb2, 'v1alpha': reflection_v1alpha_pb2}
SERVED = {'envoy.service.ratelimit.v3.RateLimitService', 'envoy.service.rate_limit_quota.v3.RateLimitQuotaService',
          'grpc.health.v1.Health', 'grpc.reflection.v1.ServerReflection', 'grpc.reflection.v1alpha.ServerReflection'}


def reflect(port, requests, version='v1'):
    """Sends the requests on one ServerReflectionInfo stream. -> the responses, in order."""
    pb = VERSIONS[version]
    method = '/grpc.reflection.%s.ServerReflection/ServerReflectionInfo' % version
    call = harness.channel(port).stream_stream(method, request_serializer=pb.ServerReflectionRequest.SerializeToString,
                                               response_deserializer=pb.ServerReflectionResponse.FromString)
    return list(call(iter([pb.ServerReflectionRequest(**r) for r in requests]), timeout=5))


def pool_of(response):
    """A descriptor pool built only from the files the server sent (dependencies first, as it sends them)."""
    pool = descriptor_pool.DescriptorPool()
    for raw in response.file_descriptor_response.file_descriptor_proto:
        pool.Add(descriptor_pb2.FileDescriptorProto.FromString(raw))
    return pool


class Reflection(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.s = Sluice(rules={'refl.yaml': RULES})
        wait_healthy(cls.s)

    @classmethod
    def tearDownClass(cls):
        cls.s.close()

    def test_list_services_in_both_versions(self):
        for version in VERSIONS:
            (r,) = reflect(self.s.grpc_port, [{'host': 'h', 'list_services': ''}], version)
            self.assertEqual(r.valid_host, 'h')
            self.assertEqual(r.original_request.list_services, '')
            self.assertEqual({s.name for s in r.list_services_response.service}, SERVED, version)

    def test_describe_and_call_without_proto_files(self):
        (r,) = reflect(self.s.grpc_port, [{'file_containing_symbol': 'envoy.service.ratelimit.v3.RateLimitService'}])
        self.assertEqual(r.WhichOneof('message_response'), 'file_descriptor_response', r)
        pool = pool_of(r)  # fails unless every import came along
        service = pool.FindServiceByName('envoy.service.ratelimit.v3.RateLimitService')
        method = service.FindMethodByName('ShouldRateLimit')
        self.assertEqual(method.input_type.full_name, 'envoy.service.ratelimit.v3.RateLimitRequest')
        # A field of an imported file is described too (RateLimitDescriptor comes from another file).
        descriptor_type = method.input_type.fields_by_name['descriptors'].message_type
        self.assertEqual(descriptor_type.full_name, 'envoy.extensions.common.ratelimit.v3.RateLimitDescriptor')
        factory = message_factory.MessageFactory(pool)
        request_class = factory.GetPrototype(method.input_type)
        response_class = factory.GetPrototype(method.output_type)
        request = request_class(domain='refl')
        entry = request.descriptors.add().entries.add()
        entry.key, entry.value = 'user', 'dynamic'
        call = harness.channel(self.s.grpc_port).unary_unary(
            '/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit',
            request_serializer=lambda m: m.SerializeToString(), response_deserializer=response_class.FromString)
        codes = [response_class.Code.Name(call(request, timeout=5).overall_code) for _ in range(3)]
        self.assertEqual(codes, ['OK', 'OK', 'OVER_LIMIT'])

    def test_symbols_files_and_errors_on_one_stream(self):
        replies = reflect(self.s.grpc_port, [
            {'file_containing_symbol': 'envoy.service.ratelimit.v3.RateLimitService.ShouldRateLimit'},
            {'file_containing_symbol': 'grpc.health.v1.HealthCheckRequest'},
            {'file_containing_symbol': 'no.such.Symbol'},
            {'file_by_filename': 'grpc/health/v1/health.proto'},
            {'file_by_filename': 'health.proto'},
            {'all_extension_numbers_of_type': 'envoy.service.ratelimit.v3.RateLimitRequest'},
            {'all_extension_numbers_of_type': 'no.such.Type'},
            {'file_containing_extension': {'containing_type': 'no.such.Type', 'extension_number': 1}},
            {'host': 'only a host'},
        ], 'v1alpha')
        self.assertEqual(len(replies), 9)
        kinds = [r.WhichOneof('message_response') for r in replies]
        self.assertEqual(kinds, ['file_descriptor_response', 'file_descriptor_response', 'error_response',
                                 'file_descriptor_response', 'error_response', 'all_extension_numbers_response',
                                 'error_response', 'error_response', 'error_response'])
        self.assertIsNotNone(pool_of(replies[0]).FindMethodByName(
            'envoy.service.ratelimit.v3.RateLimitService.ShouldRateLimit'))
        self.assertEqual((replies[2].error_response.error_code, replies[2].error_response.error_message),
                         (5, "symbol 'no.such.Symbol' is not known to this server"))
        names = [descriptor_pb2.FileDescriptorProto.FromString(raw).name
                 for raw in replies[3].file_descriptor_response.file_descriptor_proto]
        self.assertEqual(names, ['grpc/health/v1/health.proto'])
        self.assertEqual(replies[4].error_response.error_code, 5)
        self.assertEqual(replies[5].all_extension_numbers_response.base_type_name,
                         'envoy.service.ratelimit.v3.RateLimitRequest')
        self.assertEqual(replies[8].error_response.error_code, 3)
        # Each file once per reply, dependencies before the files that import them.
        names = [descriptor_pb2.FileDescriptorProto.FromString(raw).name
                 for raw in replies[0].file_descriptor_response.file_descriptor_proto]
        self.assertEqual(len(names), len(set(names)))
        # Upstream's paths, in the files' names and in their imports: a client holding Envoy's protos sees the
        # same files, not a second copy of each type.
        self.assertEqual(names[-1], 'envoy/service/ratelimit/v3/rls.proto')
        self.assertIn('envoy/extensions/common/ratelimit/v3/ratelimit.proto', names)
        self.assertIn('envoy/config/core/v3/base.proto', names)
        rls = descriptor_pb2.FileDescriptorProto.FromString(
            replies[0].file_descriptor_response.file_descriptor_proto[-1])
        self.assertIn('envoy/extensions/common/ratelimit/v3/ratelimit.proto', rls.dependency)
        self.assertEqual(set(rls.dependency) - set(names), set())
        self.assertTrue(all('/' in n for n in names), names)

    def test_not_a_request(self):
        call = harness.channel(self.s.grpc_port).stream_stream(
            '/grpc.reflection.v1.ServerReflection/ServerReflectionInfo',
            request_serializer=lambda b: b, response_deserializer=reflection_pb2.ServerReflectionResponse.FromString)
        with self.assertRaises(grpc.RpcError) as e:
            list(call(iter([b'\xff\xff\xff']), timeout=5))
        self.assertEqual(e.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)


class Disabled(unittest.TestCase):
    def test_reflection_enabled_false(self):
        with Sluice(rules={'refl.yaml': RULES}, env={'REFLECTION_ENABLED': 'false'}) as s:
            wait_healthy(s)
            with self.assertRaises(grpc.RpcError) as e:
                reflect(s.grpc_port, [{'list_services': ''}])
            self.assertEqual(e.exception.code(), grpc.StatusCode.UNIMPLEMENTED)


if __name__ == '__main__':
    unittest.main()
