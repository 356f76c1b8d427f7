// Progress of a long job on stderr: a redrawn bar when stderr is a terminal, one plain line per
// stage or detail change otherwise (logs and CI output stay readable). Single-threaded use.
#pragma once

#include <string>

namespace fusor {

class ProgressDisplay {
 public:
  ProgressDisplay();
  ~ProgressDisplay();
  void Update(const std::string& stage, double fraction, const std::string& detail);
  void Finish();

 private:
  bool tty_;
  bool drawn_ = false;
  std::string last_stage_;
  std::string last_detail_;
};

}  // namespace fusor
