// The in-memory graph IR: tensors (edges) and nodes (op applications) with static shapes, plus the
// producer/consumer links between them. Tensors and nodes live in vectors owned by the Graph and
// are named by dense integer ids (TensorId, NodeId), so copying a graph or a region of it is a
// vector copy. After import, node ids follow the canonical topological order (graph/canonical.h),
// which is the order plans refer to.
//
// A Graph is a value: not synchronised, safe to read from many threads once built, never mutated
// while shared. Every mutation that changes edges must be followed by Link().
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <variant>
#include <vector>

#include "base/status.h"
#include "graph/dtype.h"

namespace fusor {

using TensorId = int32_t;
using NodeId = int32_t;
inline constexpr int32_t kNoId = -1;

using Shape = std::vector<int64_t>;

// Product of dims; 1 for a scalar. Assumes a validated shape (no overflow, no negative dims).
int64_t NumElements(const Shape& dims);
// "1x3x224x224", or "scalar".
std::string ShapeString(const Shape& dims);

enum class TensorKind : uint8_t {
  kActivation = 1,  // Produced by a node.
  kGraphInput = 2,  // Fed by the caller.
  kWeight = 3,      // An initializer: dims and dtype only, data not carried.
  kConstant = 4,    // A small constant whose values are carried in int_data / float_data.
};
std::string_view TensorKindName(TensorKind k);

struct Tensor {
  std::string name;
  DType dtype = DType::kUnspecified;
  Shape dims;
  TensorKind kind = TensorKind::kActivation;
  std::vector<int64_t> int_data;   // Values of an integer/bool kConstant, row-major.
  std::vector<double> float_data;  // Values of a floating-point kConstant, row-major.

  // Filled by Graph::Link().
  NodeId producer = kNoId;
  std::vector<NodeId> consumers;  // One entry per consuming node (a node reading it twice: once).

  int64_t num_elements() const { return NumElements(dims); }
  int64_t bytes() const { return num_elements() * DTypeSize(dtype); }
  bool is_constant_data() const { return kind == TensorKind::kConstant; }
};

// A tensor-valued attribute (for example ConstantOfShape's value).
struct AttrTensor {
  DType dtype = DType::kUnspecified;
  Shape dims;
  std::vector<int64_t> int_data;
  std::vector<double> float_data;
  bool operator==(const AttrTensor&) const = default;
};

using AttrValue = std::variant<int64_t, double, std::string, std::vector<int64_t>,
                               std::vector<double>, std::vector<std::string>, AttrTensor>;

struct Attribute {
  std::string name;
  AttrValue value;
  bool operator==(const Attribute&) const = default;
};

struct Node {
  std::string name;
  std::string op_type;
  std::string domain;  // Empty for the default ONNX domain.
  // The since_version of the operator schema the model's opset resolves to (Softmax-13, ...): ops
  // whose semantics changed between opsets differ here, so the hash tells them apart. 0 if unknown.
  int32_t op_version = 0;
  std::vector<TensorId> inputs;  // kNoId marks an omitted optional input.
  std::vector<TensorId> outputs;
  std::vector<Attribute> attributes;  // Sorted by name.

  const Attribute* FindAttr(std::string_view attr_name) const;
  int64_t GetInt(std::string_view attr_name, int64_t fallback) const;
  double GetFloat(std::string_view attr_name, double fallback) const;
  std::string GetString(std::string_view attr_name, std::string fallback) const;
  std::vector<int64_t> GetInts(std::string_view attr_name) const;  // Empty when absent.
  // Sets or replaces an attribute, keeping the list sorted.
  void SetAttr(std::string attr_name, AttrValue value);
  // The id of input i, or kNoId when absent or omitted.
  TensorId input(size_t i) const { return i < inputs.size() ? inputs[i] : kNoId; }
};

// `attributes` sorted by name, as Node::attributes keeps them; InvalidArgument naming `node` and
// the first name given twice. O(n log n): converting a node attribute by attribute with SetAttr
// is quadratic in their number.
StatusOr<std::vector<Attribute>> SortedAttributes(std::vector<Attribute> attributes,
                                                  std::string_view node);

class Graph {
 public:
  std::string model_name;
  std::map<std::string, std::string> metadata;
  int64_t opset = 0;

  // Adds a tensor and returns its id. Names are expected unique; Validate() reports duplicates.
  TensorId AddTensor(Tensor t);
  NodeId AddNode(Node n);

  const std::vector<Tensor>& tensors() const { return tensors_; }
  const std::vector<Node>& nodes() const { return nodes_; }
  const Tensor& tensor(TensorId id) const { return tensors_[id]; }
  const Node& node(NodeId id) const { return nodes_[id]; }
  Tensor& mutable_tensor(TensorId id) { return tensors_[id]; }
  Node& mutable_node(NodeId id) { return nodes_[id]; }
  size_t num_nodes() const { return nodes_.size(); }
  size_t num_tensors() const { return tensors_.size(); }

  const std::vector<TensorId>& inputs() const { return inputs_; }
  const std::vector<TensorId>& outputs() const { return outputs_; }
  void AddInput(TensorId t) { inputs_.push_back(t); }
  void AddOutput(TensorId t) { outputs_.push_back(t); }
  bool IsGraphOutput(TensorId t) const;

  // The id of the first tensor with this name.
  std::optional<TensorId> FindTensor(std::string_view name) const;

  // Rebuilds every tensor's producer and consumers from the nodes' inputs and outputs.
  void Link();

  // Kahn's algorithm; ties go to the lower node id, so an already topological graph keeps its
  // order. Fails with InvalidArgument naming a node on a cycle.
  StatusOr<std::vector<NodeId>> TopologicalOrder() const;

  // Returns a graph with the nodes in `order` (a permutation of all node ids), renumbered 0..n-1.
  Graph Reordered(std::span<const NodeId> order) const;

  // Returns a copy keeping only the nodes in `keep` (in that order) and the tensors they, the graph
  // inputs and the graph outputs still reference; tensor ids are renumbered.
  Graph Compacted(std::span<const NodeId> keep) const;

  // Copies a region: the given nodes (in the given order) and every tensor they touch. Tensors
  // produced outside the region become graph inputs of the copy (weights and constants keep their
  // kind); tensors produced inside and read outside, or outputs of this graph, become its outputs.
  // Cost is proportional to the region, not the graph.
  Graph ExtractRegion(std::span<const NodeId> region) const;

 private:
  std::vector<Tensor> tensors_;
  std::vector<Node> nodes_;
  std::vector<TensorId> inputs_;
  std::vector<TensorId> outputs_;
  std::unordered_map<std::string, TensorId> tensor_by_name_;
};

}  // namespace fusor
