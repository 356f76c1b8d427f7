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

grpc::Status ToGrpcStatus(const Status& s);

// `context` (for example "fusord at 10.0.0.5:7070") prefixes the message.
Status FromGrpcStatus(const grpc::Status& s, std::string_view context = {});

}  // namespace fusor
