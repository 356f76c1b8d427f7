// Proto equality for the harnesses' round-trip checks: field by field, NaN equal to NaN (a NaN
// float attribute survives the wire form bit for bit, but never compares equal to itself).
// Returns the differences, empty when the messages are equal. Pure function; thread-safe.
#pragma once

#include <google/protobuf/message.h>
#include <google/protobuf/util/field_comparator.h>
#include <google/protobuf/util/message_differencer.h>

#include <string>

namespace fusor::fuzz {

inline std::string ProtoDifferences(const google::protobuf::Message& a,
                                    const google::protobuf::Message& b) {
  google::protobuf::util::DefaultFieldComparator comparator;
  comparator.set_treat_nan_as_equal(true);
  google::protobuf::util::MessageDifferencer differ;
  differ.set_field_comparator(&comparator);
  std::string diff;
  differ.ReportDifferencesToString(&diff);
  if (differ.Compare(a, b)) return {};
  return diff.empty() ? "(unreported difference)" : diff;
}

}  // namespace fusor::fuzz
