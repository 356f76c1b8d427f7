#include "server/reflection_service.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/descriptor.pb.h>

#include "proto/tuner.grpc.pb.h"

namespace fusor {
namespace {

namespace pb = google::protobuf;
namespace reflection = grpc::reflection::v1alpha;

void AddWithImports(const pb::FileDescriptor* file, std::set<std::string>* files) {
  if (!files->insert(file->name()).second) return;
  for (int i = 0; i < file->dependency_count(); ++i) AddWithImports(file->dependency(i), files);
}

// Dependencies before the files that import them, each once.
void AppendFile(const pb::FileDescriptor* file, std::set<std::string>* sent,
                reflection::FileDescriptorResponse* out) {
  if (!sent->insert(file->name()).second) return;
  for (int i = 0; i < file->dependency_count(); ++i) AppendFile(file->dependency(i), sent, out);
  pb::FileDescriptorProto proto;
  file->CopyTo(&proto);
  proto.SerializeToString(out->add_file_descriptor_proto());
}

void NotFound(const std::string& what, reflection::ServerReflectionResponse* response) {
  response->mutable_error_response()->set_error_code(grpc::StatusCode::NOT_FOUND);
  response->mutable_error_response()->set_error_message(what +
                                                        " is not part of fusord's public API");
}

}  // namespace

ReflectionService::ReflectionService()
    : services_({v1::FusionTuner::service_full_name(), "grpc.health.v1.Health",
                 reflection::ServerReflection::service_full_name()}) {
  AddWithImports(v1::TuneRequest::descriptor()->file(), &public_files_);
}

grpc::Status ReflectionService::ServerReflectionInfo(
    grpc::ServerContext*, grpc::ServerReaderWriter<reflection::ServerReflectionResponse,
                                                   reflection::ServerReflectionRequest>* stream) {
  reflection::ServerReflectionRequest request;
  while (stream->Read(&request)) {
    if (!stream->Write(Answer(request))) break;
  }
  return grpc::Status::OK;
}

reflection::ServerReflectionResponse ReflectionService::Answer(
    const reflection::ServerReflectionRequest& request) const {
  reflection::ServerReflectionResponse response;
  response.set_valid_host(request.host());
  *response.mutable_original_request() = request;
  const pb::DescriptorPool* pool = pb::DescriptorPool::generated_pool();
  switch (request.message_request_case()) {
    case reflection::ServerReflectionRequest::kListServices:
      for (const std::string& name : services_) {
        response.mutable_list_services_response()->add_service()->set_name(name);
      }
      break;
    case reflection::ServerReflectionRequest::kFileByFilename:
      if (!DescribeFile(pool->FindFileByName(request.file_by_filename()), &response)) {
        NotFound("file '" + request.file_by_filename() + "'", &response);
      }
      break;
    case reflection::ServerReflectionRequest::kFileContainingSymbol:
      if (!DescribeFile(pool->FindFileContainingSymbol(request.file_containing_symbol()),
                        &response)) {
        NotFound("symbol '" + request.file_containing_symbol() + "'", &response);
      }
      break;
    default:  // Extensions: fusor.v1 has none.
      NotFound("that request", &response);
  }
  return response;
}

bool ReflectionService::DescribeFile(const pb::FileDescriptor* file,
                                     reflection::ServerReflectionResponse* response) const {
  if (file == nullptr || public_files_.count(file->name()) == 0) return false;
  std::set<std::string> sent;
  AppendFile(file, &sent, response->mutable_file_descriptor_response());
  return true;
}

}  // namespace fusor
