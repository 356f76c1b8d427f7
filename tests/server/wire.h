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

// A unary call of `method` ("/fusor.v1.FusionTuner/GetPlan") with `payload` as the request.
grpc::Status RawUnaryCall(const std::shared_ptr<grpc::Channel>& channel, const std::string& method,
                          const std::string& payload, std::string* response = nullptr);

// grpc.health.v1.Health/Check for `service` ("" for the server): 1 SERVING, 2 NOT_SERVING,
// -1 when the call failed.
int HealthStatus(const std::shared_ptr<grpc::Channel>& channel, const std::string& service = "");

// The services server reflection lists, as raw response bytes (contains the service names), or
// "" when the call failed.
std::string ReflectionListing(const std::shared_ptr<grpc::Channel>& channel);

}  // namespace fusor::testing
