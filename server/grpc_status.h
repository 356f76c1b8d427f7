// Conversion between Fusor's Status and grpc::Status, in both directions: fusord turns the core's
// Status into the wire code, and the client's RemoteTuner turns the wire code back, so the CLI's
// exit codes (client/exit_codes.h) are the same in local and remote mode. Codes with no gRPC
// counterpart (Corruption, IOError) become INTERNAL on the wire; the message is kept.
// Pure functions; thread-safe.
#pragma once

#include <grpcpp/support/status.h>

#include <string_view>

#include "base/status.h"

namespace fusor {

// The trailing metadata key under which fusord returns every call's request id, the id its log
// line carries; the client names it in the error it reports.
inline constexpr char kRequestIdMetadata[] = "fusor-request-id";

grpc::Status ToGrpcStatus(const Status& s);

// The canonical name of a gRPC status code ("OK", "NOT_FOUND", "UNAUTHENTICATED").
std::string_view GrpcCodeName(grpc::StatusCode code);

// `context` (for example "fusord at 10.0.0.5:7070") prefixes the message.
Status FromGrpcStatus(const grpc::Status& s, std::string_view context = {});

}  // namespace fusor
