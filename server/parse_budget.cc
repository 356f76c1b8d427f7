#include "server/parse_budget.h"

#include <google/protobuf/dynamic_message.h>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/message.h>
#include <google/protobuf/wire_format_lite.h>

#include <climits>
#include <string>
#include <unordered_map>
#include <utility>

namespace fusor {
namespace {

namespace pb = google::protobuf;
using pb::internal::WireFormatLite;

// A string object or a repeated field's slot with its allocation overhead.
constexpr int64_t kFieldBytes = 64;
constexpr int64_t kAllocationBytes = 16;
// Protobuf's own default recursion limit: deeper messages fail to parse anyway.
constexpr int kMaxDepth = 100;

// Walks the wire format by the message types, summing what parsing would build; false where the
// bytes are not a well-formed message.
class CostScan {
 public:
  explicit CostScan(pb::io::CodedInputStream* in) : in_(in) {}

  bool Message(const pb::Descriptor& type, int depth) {
    if (depth > kMaxDepth) return false;
    for (;;) {
      const uint32_t tag = in_->ReadTag();
      if (tag == 0) return true;  // The end of the message (or of its enclosing limit).
      cost_ += kFieldBytes;
      if (!Field(type, tag, depth)) return false;
    }
  }

  int64_t cost() const { return cost_; }

 private:
  bool Field(const pb::Descriptor& type, uint32_t tag, int depth) {
    uint64_t skipped64 = 0;
    uint32_t skipped32 = 0;
    switch (WireFormatLite::GetTagWireType(tag)) {
      case WireFormatLite::WIRETYPE_VARINT:
        return in_->ReadVarint64(&skipped64);
      case WireFormatLite::WIRETYPE_FIXED64:
        return in_->ReadLittleEndian64(&skipped64);
      case WireFormatLite::WIRETYPE_FIXED32:
        return in_->ReadLittleEndian32(&skipped32);
      case WireFormatLite::WIRETYPE_LENGTH_DELIMITED:
        return Delimited(type, WireFormatLite::GetTagFieldNumber(tag), depth);
      default:  // Groups: fusor.v1 has none.
        return false;
    }
  }

  bool Delimited(const pb::Descriptor& type, int number, int depth) {
    uint32_t length = 0;
    if (!in_->ReadVarint32(&length) || length > static_cast<uint32_t>(INT32_MAX)) return false;
    const pb::FieldDescriptor* field = type.FindFieldByNumber(number);
    if (field != nullptr && field->type() == pb::FieldDescriptor::TYPE_MESSAGE) {
      cost_ += ObjectBytes(*field->message_type());
      const auto limit = in_->PushLimit(static_cast<int>(length));
      if (!Message(*field->message_type(), depth + 1) || in_->BytesUntilLimit() != 0) return false;
      in_->PopLimit(limit);
      return true;
    }
    const bool packed = field != nullptr && field->is_repeated() &&
                        field->type() != pb::FieldDescriptor::TYPE_STRING &&
                        field->type() != pb::FieldDescriptor::TYPE_BYTES;
    cost_ += (packed ? 8 : 1) * int64_t{length};
    return in_->Skip(static_cast<int>(length));
  }

  int64_t ObjectBytes(const pb::Descriptor& type) {
    auto [it, added] = object_bytes_.try_emplace(&type, 0);
    if (added) {
      const pb::Message* prototype = pb::MessageFactory::generated_factory()->GetPrototype(&type);
      it->second = (prototype ? prototype->SpaceUsedLong() : kFieldBytes) + kAllocationBytes;
    }
    return it->second;
  }

  pb::io::CodedInputStream* in_;
  int64_t cost_ = 0;
  std::unordered_map<const pb::Descriptor*, int64_t> object_bytes_;
};

std::string SizeText(int64_t bytes) {
  if (bytes >= (1 << 20)) return std::to_string(bytes >> 20) + " MiB";
  return std::to_string((bytes + 1023) >> 10) + " KiB";
}

}  // namespace

StatusOr<int64_t> EstimateParsedBytes(const pb::Descriptor& type,
                                      pb::io::ZeroCopyInputStream* wire) {
  pb::io::CodedInputStream in(wire);
  CostScan scan(&in);
  if (!scan.Message(type, 0) || !in.ConsumedEntireMessage()) {
    return Status::InvalidArgument("the request is not a well-formed " + type.full_name() +
                                   " message");
  }
  return scan.cost() + scan.cost() / 8;  // Allocator slack.
}

ParseBudget::Hold::Hold(Hold&& other) noexcept
    : budget_(std::exchange(other.budget_, nullptr)), bytes_(other.bytes_) {}

ParseBudget::Hold& ParseBudget::Hold::operator=(Hold&& other) noexcept {
  if (this != &other) {
    if (budget_ != nullptr) budget_->Release(bytes_);
    budget_ = std::exchange(other.budget_, nullptr);
    bytes_ = other.bytes_;
  }
  return *this;
}

ParseBudget::Hold::~Hold() {
  if (budget_ != nullptr) budget_->Release(bytes_);
}

StatusOr<ParseBudget::Hold> ParseBudget::Reserve(int64_t bytes, std::string_view what) {
  std::lock_guard<std::mutex> lock(mu_);
  if (bytes > capacity_ - held_) {
    return Status::ResourceExhausted(std::string(what) + " needs ~" + SizeText(bytes) +
                                     " of fusord's parse budget of " + SizeText(capacity_) +
                                     ", of which " + SizeText(capacity_ - held_) +
                                     " is free (send a smaller graph, or retry when other calls "
                                     "have finished)");
  }
  held_ += bytes;
  return Hold(this, bytes);
}

int64_t ParseBudget::held() const {
  std::lock_guard<std::mutex> lock(mu_);
  return held_;
}

void ParseBudget::Release(int64_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  held_ -= bytes;
}

}  // namespace fusor
