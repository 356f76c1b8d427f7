// Brings an ONNX model of any default-domain opset into the range the import reads,
// kMinOpset..kMaxOpset, before anything else looks at its nodes.
//
// The range's ends have reasons. kMaxOpset is the newest opset whose schemas the linked libonnx
// (Debian's 1.12) knows: shape inference, which every import runs, needs them. kMinOpset is the
// oldest opset whose op forms the import and the runtime read (Pad's pads, Clip's bounds and
// Resize's scales as inputs, Upsample gone).
//
// Older models (opsets 1-10, every export before 2020) go through libonnx's version converter
// (onnx::version_conversion::ConvertVersion) to kMinOpset. Newer ones (18 and up) are rewritten
// op by op to kMaxOpset, because libonnx 1.12 cannot read their schemas: an op whose semantics did
// not change after kMaxOpset (only new types) keeps its node; one that changed is rewritten when
// the model uses it in a form kMaxOpset expresses (opset 18's Reduce* axes input back to an
// attribute, Split's num_outputs dropped, Resize's and Cast's new attributes at their defaults);
// an op new after kMaxOpset, a form kMaxOpset cannot express, or an opset newer than
// kNewestKnownOpset is refused naming the node, the op and the opset. Stateless; thread-safe.
#pragma once

#include <cstdint>

#include "base/status.h"

namespace onnx {
class ModelProto;
}

namespace fusor {

inline constexpr int kMinOpset = 11;
inline constexpr int kMaxOpset = 17;
// The newest opset whose changes from kMaxOpset this file knows; newer models are refused.
inline constexpr int kNewestKnownOpset = 23;

// Converts `model` in place when its default-domain opset is outside kMinOpset..kMaxOpset; a
// model that has no default-domain opset, or is already inside the range, is left as it is.
Status ConvertToSupportedOpset(onnx::ModelProto* model);

}  // namespace fusor
