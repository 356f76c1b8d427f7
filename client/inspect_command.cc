#include "client/inspect_command.h"

#include <iostream>
#include <memory>

#include "client/exit_codes.h"
#include "client/model_options.h"
#include "graph/summary.h"
#include "lowering/unfused_ops.h"

namespace fusor {

void AddInspectCommand(CLI::App& app, int* exit_code) {
  auto* cmd =
      app.add_subcommand("inspect", "Import a model and print its ops, FLOPs, bytes and hash");
  auto model = std::make_shared<ModelOptions>();
  auto json = std::make_shared<bool>(false);
  model->AddTo(cmd);
  cmd->add_flag("--json", *json, "Print JSON instead of a table");
  cmd->callback([model, json, exit_code] {
    auto g = model->Import();
    if (!g.ok()) {
      *exit_code = ReportError("inspect", g.status());
      return;
    }
    GraphSummary s = Summarize(*g, UnfusedOps(*g));
    if (*json) {
      std::cout << SummaryToJson(s).dump(2) << "\n";
    } else {
      std::cout << SummaryToText(s);
    }
    *exit_code = kExitOk;
  });
}

}  // namespace fusor
