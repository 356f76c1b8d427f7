#include "server/grpc_status.h"

#include <gtest/gtest.h>

namespace fusor {
namespace {

TEST(GrpcStatus, EveryCodeRoundTrips) {
  using C = Status::Code;
  for (Status s :
       {Status::InvalidArgument("m"), Status::NotFound("m"), Status::AlreadyExists("m"),
        Status::ResourceExhausted("m"), Status::FailedPrecondition("m"), Status::Unimplemented("m"),
        Status::Unavailable("m"), Status::DeadlineExceeded("m"), Status::Cancelled("m"),
        Status::PermissionDenied("m"), Status::Unauthenticated("m"), Status::Internal("m")}) {
    Status back = FromGrpcStatus(ToGrpcStatus(s));
    EXPECT_EQ(back.code(), s.code()) << s.ToString();
    EXPECT_EQ(back.message(), "m");
  }
  EXPECT_TRUE(FromGrpcStatus(ToGrpcStatus(Status::Ok())).ok());
  EXPECT_EQ(ToGrpcStatus(Status::Corruption("db")).error_code(), grpc::StatusCode::INTERNAL);
  EXPECT_EQ(ToGrpcStatus(Status::IOError("disk")).error_code(), grpc::StatusCode::INTERNAL);
  EXPECT_EQ(FromGrpcStatus(grpc::Status(grpc::StatusCode::UNKNOWN, "x")).code(), C::kInternal);
}

TEST(GrpcStatus, ContextPrefixesTheMessage) {
  Status s = FromGrpcStatus(grpc::Status(grpc::StatusCode::UNAVAILABLE, "connection refused"),
                            "fusord at 127.0.0.1:1");
  EXPECT_EQ(s.code(), Status::Code::kUnavailable);
  EXPECT_EQ(s.message(), "fusord at 127.0.0.1:1: connection refused");
}

}  // namespace
}  // namespace fusor
