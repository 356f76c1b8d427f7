// Wire-level helpers for the server tests: raw bytes to a TCP port, generic (untyped) gRPC calls
// with arbitrary payloads, the standard health check and a reflection listing. Used against both
// the in-process server and a real fusord.
#pragma once

#include <grpcpp/grpcpp.h>

#include <string>

namespace fusor::testing {

// Connects to 127.0.0.1:port, writes `bytes`, reads until the peer closes or 2 s pass.
// False when the connection could not be made.
bool SendRawBytes(int port, const std::string& bytes);

// Protobuf wire encoding of one length-delimited field (a string, bytes or a sub-message).
std::string LengthDelimitedField(int field, const std::string& value);

// A unary call of `method` ("/fusor.v1.FusionTuner/GetPlan") with `payload` as the request and
// `token` ("" for none) as its bearer token; the deadline is 10 s.
grpc::Status RawUnaryCall(const std::shared_ptr<grpc::Channel>& channel, const std::string& method,
                          const std::string& payload, std::string* response = nullptr,
                          const std::string& token = "");

// grpc.health.v1.Health/Check for `service` ("" for the server): 1 SERVING, 2 NOT_SERVING,
// -1 when the call failed.
int HealthStatus(const std::shared_ptr<grpc::Channel>& channel, const std::string& service = "");

// The services server reflection lists, as raw response bytes (contains the service names), or
// "" when the call failed.
std::string ReflectionListing(const std::shared_ptr<grpc::Channel>& channel);

// The raw reply of server reflection to one serialised ServerReflectionRequest, "" when the call
// failed.
std::string ReflectionReply(const std::shared_ptr<grpc::Channel>& channel,
                            const std::string& request);

}  // namespace fusor::testing
