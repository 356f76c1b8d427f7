// ReflectionService: gRPC server reflection (grpc.reflection.v1alpha) limited to what a client of
// fusord may need: it lists the fusor.v1 service, health and itself, and describes only the
// files of the fusor.v1 API (proto/tuner.proto and what it imports). gRPC's own reflection
// plugin describes every message compiled into the binary (ONNX's, protobuf's descriptor), which
// tells a stranger which libraries fusord links. Anything else is answered NOT_FOUND.
//
// Stateless after construction; thread-safe, as gRPC's synchronous server calls it from many
// threads.
#pragma once

#include <set>
#include <string>
#include <vector>

#include <google/protobuf/descriptor.h>

#include "proto/reflection.grpc.pb.h"

namespace fusor {

class ReflectionService final : public grpc::reflection::v1alpha::ServerReflection::Service {
 public:
  ReflectionService();

  grpc::Status ServerReflectionInfo(
      grpc::ServerContext* ctx,
      grpc::ServerReaderWriter<grpc::reflection::v1alpha::ServerReflectionResponse,
                               grpc::reflection::v1alpha::ServerReflectionRequest>* stream)
      override;

  // What list_services answers.
  const std::vector<std::string>& services() const { return services_; }

 private:
  grpc::reflection::v1alpha::ServerReflectionResponse Answer(
      const grpc::reflection::v1alpha::ServerReflectionRequest& request) const;
  // Puts the file and the files it imports, dependencies first, in the response; false (and
  // nothing put) when it is not a public file.
  bool DescribeFile(const google::protobuf::FileDescriptor* file,
                    grpc::reflection::v1alpha::ServerReflectionResponse* response) const;

  std::vector<std::string> services_;
  std::set<std::string> public_files_;  // proto/tuner.proto and what it imports, transitively.
};

}  // namespace fusor
