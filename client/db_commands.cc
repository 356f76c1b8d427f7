#include "client/db_commands.h"

#include "client/db_cli.h"

namespace fusor {

void AddDbCommands(CLI::App& app, int* exit_code) {
  CLI::App* db = app.add_subcommand("db", "Query and move plans in a local tuning database");
  db->require_subcommand(1);
  dbcli::AddQuery(*db, exit_code);
  dbcli::AddShow(*db, exit_code);
  dbcli::AddStats(*db, exit_code);
  dbcli::AddExport(*db, exit_code);
  dbcli::AddImport(*db, exit_code);
}

}  // namespace fusor
