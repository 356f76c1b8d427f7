// Integers read from JSON Fusor did not write (plan files, profiles, fusord's config). nlohmann's
// get<T>() converts with wrap-around (2^32 read as int32 is 0), and a float beyond T's range is
// undefined behaviour, so every strict JSON parser reads its integers through JsonInteger. It lives
// in graph/ because every folder with such a parser depends on graph/ and nlohmann_json already.
// Header-only; pure functions, thread-safe.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <type_traits>
#include <utility>

namespace fusor {

// `v` as T when it is a JSON integer (not a float, not a string) that T represents exactly.
template <typename T>
std::optional<T> JsonInteger(const nlohmann::json& v) {
  static_assert(std::is_integral_v<T> && !std::is_same_v<T, bool>);
  if (v.is_number_unsigned()) {
    const uint64_t x = v.get<uint64_t>();
    if (!std::in_range<T>(x)) return std::nullopt;
    return static_cast<T>(x);
  }
  if (!v.is_number_integer()) return std::nullopt;
  const int64_t x = v.get<int64_t>();
  if (!std::in_range<T>(x)) return std::nullopt;
  return static_cast<T>(x);
}

}  // namespace fusor
