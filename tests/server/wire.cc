#include "tests/server/wire.h"

#include <arpa/inet.h>
#include <grpcpp/generic/generic_stub.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

namespace fusor::testing {
namespace {

grpc::ByteBuffer ToBuffer(const std::string& bytes) {
  grpc::Slice slice(bytes);
  return grpc::ByteBuffer(&slice, 1);
}

std::string FromBuffer(const grpc::ByteBuffer& buffer) {
  grpc::Slice slice;
  if (!buffer.DumpToSingleSlice(&slice).ok()) return "";
  return std::string(reinterpret_cast<const char*>(slice.begin()), slice.size());
}

// A completion queue must be shut down and drained before it is destroyed.
void Drain(grpc::CompletionQueue* cq) {
  cq->Shutdown();
  void* tag;
  bool ok;
  while (cq->Next(&tag, &ok)) {
  }
}

}  // namespace

std::string LengthDelimitedField(int field, const std::string& value) {
  std::string out(1, static_cast<char>((field << 3) | 2));
  for (uint64_t v = value.size();; v >>= 7) {
    if (v < 0x80) {
      out += static_cast<char>(v);
      break;
    }
    out += static_cast<char>((v & 0x7f) | 0x80);
  }
  return out + value;
}

bool SendRawBytes(int port, const std::string& bytes) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    close(fd);
    return false;
  }
  (void)!write(fd, bytes.data(), bytes.size());
  char buf[4096];
  pollfd p{fd, POLLIN, 0};
  while (poll(&p, 1, 2000) > 0 && read(fd, buf, sizeof buf) > 0) {
  }
  close(fd);
  return true;
}

grpc::Status RawUnaryCall(const std::shared_ptr<grpc::Channel>& channel, const std::string& method,
                          const std::string& payload, std::string* response,
                          const std::string& token) {
  grpc::GenericStub stub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  if (!token.empty()) ctx.AddMetadata("authorization", "Bearer " + token);
  grpc::CompletionQueue cq;
  grpc::ByteBuffer reply;
  grpc::Status status;
  auto call = stub.PrepareUnaryCall(&ctx, method, ToBuffer(payload), &cq);
  call->StartCall();
  call->Finish(&reply, &status, reinterpret_cast<void*>(1));
  void* tag;
  bool ok;
  cq.Next(&tag, &ok);
  Drain(&cq);
  if (response) *response = FromBuffer(reply);
  return status;
}

int HealthStatus(const std::shared_ptr<grpc::Channel>& channel, const std::string& service) {
  std::string reply;
  std::string request = service.empty() ? "" : LengthDelimitedField(1, service);
  if (!RawUnaryCall(channel, "/grpc.health.v1.Health/Check", request, &reply).ok()) return -1;
  // HealthCheckResponse { ServingStatus status = 1; }: tag 0x08 then the enum value.
  if (reply.size() == 2 && reply[0] == 0x08) return reply[1];
  return reply.empty() ? 0 : -1;
}

std::string ReflectionListing(const std::shared_ptr<grpc::Channel>& channel) {
  return ReflectionReply(channel, LengthDelimitedField(7, ""));
}

// A bidi call through the generic async API: one request, one response, done.
std::string ReflectionReply(const std::shared_ptr<grpc::Channel>& channel,
                            const std::string& request) {
  grpc::GenericStub stub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  grpc::CompletionQueue cq;
  void* tag;
  bool ok = false;
  auto call =
      stub.PrepareCall(&ctx, "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo", &cq);
  grpc::ByteBuffer reply;
  bool read = false;
  call->StartCall(reinterpret_cast<void*>(1));
  if (cq.Next(&tag, &ok) && ok) {
    call->Write(ToBuffer(request), reinterpret_cast<void*>(2));
    if (cq.Next(&tag, &ok) && ok) {
      call->Read(&reply, reinterpret_cast<void*>(3));
      read = cq.Next(&tag, &ok) && ok;
    }
  }
  call->WritesDone(reinterpret_cast<void*>(4));
  cq.Next(&tag, &ok);
  grpc::Status status;
  call->Finish(&status, reinterpret_cast<void*>(5));
  cq.Next(&tag, &ok);
  Drain(&cq);
  return read ? FromBuffer(reply) : "";
}

}  // namespace fusor::testing
