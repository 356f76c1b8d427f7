// The kernel of a Concat that runs in place (lowering/concat_in_place.h): its producers wrote
// every input into its slice of the output, so running it does nothing. Binding checks that the
// memory plan placed each input there, so a plan whose buffers disagree with the lowering is an
// error when the executor is created, never a wrong value.
//
// The output is kept channel-blocked when lowering/layout.h says so; each part is then expected in
// the channel-blocked layout of its own dims, which is its slice of the blocked output. A part its
// producer stored otherwise (a conv on which oneDNN chose another layout than the lowering
// predicts) is reordered in its slice through scratch when the Concat runs, so the whole is in one
// layout whatever the producers did.
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "runtime/group_kernel.h"
#include "runtime/memory_plan.h"

namespace fusor {
namespace {

using dnnl::memory;

// Holds what it checks (names, tensors, slice offsets), not the graph.
class InPlaceConcatKernel : public GroupKernel {
 public:
  InPlaceConcatKernel(const KernelContext& ctx, NodeId concat)
      : engine_(*ctx.engine), stream_(*ctx.stream) {
    const Graph& g = *ctx.g;
    const Node& n = g.node(concat);
    concat_ = n.name;
    whole_ = {n.outputs[0], g.tensor(n.outputs[0]).name, 0};
    const int64_t element = StorageBytesPerElement(g.tensor(whole_.tensor).dtype);
    // Kept blocked, the whole and every part are whole blocks of the ISA's width.
    const bool blocked = ctx.KeepsBlocked(whole_.tensor);
    auto layout = [&](const Shape& dims) {
      return blocked ? ChannelBlocked(dims) : PlainLayout(dims);
    };
    if (blocked) whole_md_ = layout(g.tensor(whole_.tensor).dims);
    int64_t offset = 0;
    for (TensorId t : n.inputs) {
      Part part{t, g.tensor(t).name, offset * element};
      const memory::desc* stored = ctx.Stored(t);
      memory::desc from = stored ? *stored : PlainLayout(g.tensor(t).dims);
      memory::desc want = layout(g.tensor(t).dims);
      if (from != want) {
        Fix fix;
        fix.part = parts_.size();
        fix.from = from;
        fix.want = want;
        fix.offset = scratch_;
        fixes_.push_back(std::move(fix));
        scratch_ += (static_cast<int64_t>(want.get_size()) + 63) / 64 * 64;
      }
      parts_.push_back(std::move(part));
      offset += NumElements(g.tensor(t).dims);
    }
  }

  int64_t scratch_bytes() const override { return scratch_; }

  Status Bind(const TensorBuffer& tensor, void* scratch) override {
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
    // Each misplaced part: its slice as stored -> scratch in the wanted layout -> back, a copy.
    char* base = static_cast<char*>(scratch);
    for (Fix& f : fixes_) {
      void* slice = whole + parts_[f.part].byte_offset;
      f.stored = memory(f.from, engine_, slice);
      f.copy = memory(f.want, engine_, base + f.offset);
      f.slice = memory(f.want, engine_, slice);
      f.to_copy = dnnl::reorder(f.stored, f.copy);
      f.to_slice = dnnl::reorder(f.copy, f.slice);
    }
    return Status::Ok();
  }

  void Run() override {
    if (fixes_.empty()) return;
    for (Fix& f : fixes_) {
      f.to_copy.execute(stream_, f.stored, f.copy);
      f.to_slice.execute(stream_, f.copy, f.slice);
    }
    stream_.wait();
  }

  std::string Describe() const override {
    std::string d = "in place: " + std::to_string(parts_.size()) +
                    " inputs written into their slices by their producers";
    if (whole_md_) d += ", channel-blocked";
    if (!fixes_.empty()) {
      d += ", " + std::to_string(fixes_.size()) + " reordered in their slice";
    }
    return d;
  }

  // The parts are read where they lie, in whatever layout they are stored in.
  std::vector<TensorId> NativeLayouts() const override {
    std::vector<TensorId> parts;
    for (const Part& p : parts_) parts.push_back(p.tensor);
    return parts;
  }

  std::vector<std::pair<TensorId, memory::desc>> BlockedOutputs() const override {
    if (!whole_md_) return {};
    return {{whole_.tensor, *whole_md_}};
  }

 private:
  struct Part {
    TensorId tensor;
    std::string name;
    int64_t byte_offset;
  };
  struct Fix {
    size_t part = 0;
    memory::desc from, want;
    int64_t offset = 0;  // Of the copy in scratch.
    memory stored, copy, slice;
    dnnl::reorder to_copy, to_slice;
  };
  dnnl::engine engine_;
  dnnl::stream stream_;
  std::string concat_;
  Part whole_;
  std::optional<memory::desc> whole_md_;
  std::vector<Part> parts_;
  std::vector<Fix> fixes_;
  int64_t scratch_ = 0;
};

}  // namespace

StatusOr<std::unique_ptr<GroupKernel>> BuildInPlaceConcatKernel(const KernelContext& ctx,
                                                                NodeId concat) {
  return std::unique_ptr<GroupKernel>(new InPlaceConcatKernel(ctx, concat));
}

}  // namespace fusor
