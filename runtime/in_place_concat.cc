// The kernel of a Concat that runs in place (lowering/concat_in_place.h): its producers wrote
// every input into its slice of the output, so running it does nothing. Binding checks that the
// memory plan placed each input there, so a plan whose buffers disagree with the lowering is an
// error when the executor is created, never a wrong value.
#include <string>
#include <vector>

#include "runtime/group_kernel.h"
#include "runtime/memory_plan.h"

namespace fusor {
namespace {

// Holds what it checks (names, tensors, slice offsets), not the graph.
class InPlaceConcatKernel : public GroupKernel {
 public:
  InPlaceConcatKernel(const Graph& g, NodeId concat) : concat_(g.node(concat).name) {
    const Node& n = g.node(concat);
    whole_ = {n.outputs[0], g.tensor(n.outputs[0]).name, 0};
    const int64_t element = StorageBytesPerElement(g.tensor(whole_.tensor).dtype);
    int64_t offset = 0;
    for (TensorId t : n.inputs) {
      parts_.push_back({t, g.tensor(t).name, offset * element});
      offset += NumElements(g.tensor(t).dims);
    }
  }

  Status Bind(const TensorBuffer& tensor, void*) override {
    char* whole = static_cast<char*>(tensor(whole_.tensor));
    if (whole == nullptr) {
      return Status::Internal("Concat '" + concat_ + "': no buffer for '" + whole_.name + "'");
    }
    for (const Part& p : parts_) {
      if (tensor(p.tensor) != whole + p.byte_offset) {
        return Status::Internal("Concat '" + concat_ + "' runs in place, but input '" + p.name +
                                "' is not stored at its slice of '" + whole_.name + "' (byte " +
                                std::to_string(p.byte_offset) + ")");
      }
    }
    return Status::Ok();
  }
  void Run() override {}
  std::string Describe() const override {
    return "in place: " + std::to_string(parts_.size()) +
           " inputs written into their slices by their producers";
  }

 private:
  struct Part {
    TensorId tensor;
    std::string name;
    int64_t byte_offset;
  };
  std::string concat_;
  Part whole_;
  std::vector<Part> parts_;
};

}  // namespace

StatusOr<std::unique_ptr<GroupKernel>> BuildInPlaceConcatKernel(const KernelContext& ctx,
                                                                NodeId concat) {
  return std::unique_ptr<GroupKernel>(new InPlaceConcatKernel(*ctx.g, concat));
}

}  // namespace fusor
