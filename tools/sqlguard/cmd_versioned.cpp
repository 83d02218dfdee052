// sqlguard versioned list | drop TABLE — the declarations of the one version
// rule (include/sqlguard/version_cas.h).
#include <cstdio>
#include <iostream>

#include "common.h"
#include "sqlguard/validate.h"
#include "sqlguard/version_cas.h"
#include "text.h"

namespace sqlguard::cli {

void add_versioned(CLI::App& app) {
  auto* versioned = app.add_subcommand("versioned", "Tables declared versioned (the version rule): list, drop");
  versioned->require_subcommand(1);

  auto* list = versioned->add_subcommand("list", "Show every declaration: table, version column, when declared");
  list->callback([] {
    auto conn = open_db(existing_only());  // a look: never creates a database
    auto tables = versioned_tables(*conn);
    if (global().json) {
      // One object per outcome: the whole list is one object, an empty one too.
      nlohmann::json arr = nlohmann::json::array();
      for (const auto& t : tables)
        arr.push_back({{"table", t.table},
                       {"version_column", t.version_column},
                       {"declared_at", format_db_time(t.declared_at_ms)},
                       {"declared_at_ms", t.declared_at_ms}});
      print_json({{"versioned", arr}});
      return;
    }
    std::printf("%-48s %-32s %s\n", "TABLE", "VERSION COLUMN", "DECLARED AT");
    for (const auto& t : tables)
      std::printf("%-48s %-32s %s\n", terminal_safe(t.table).c_str(), terminal_safe(t.version_column).c_str(),
                  format_db_time(t.declared_at_ms).c_str());
  });

  auto table = std::make_shared<std::string>();
  auto* drop = versioned->add_subcommand(
      "drop", "Remove the declaration of TABLE: writers started afterwards no longer bump its version; exits 3 if "
              "there was none");
  drop->add_option("TABLE", *table, "Table name, as any spelling of an existing table or as `versioned list` shows it")
      ->required();
  drop->callback([table] {
    try {
      validate_identifier(*table, "TABLE");
    } catch (const Error& e) {
      throw BadValue("TABLE", e.message());
    }
    auto conn = open_db(existing_only());
    const bool dropped = undeclare_versioned_table(*conn, *table);
    if (global().json) print_json({{"dropped", dropped}, {"table", *table}});
    else if (dropped) std::cout << "dropped the declaration of '" << terminal_safe(*table) << "'\n";
    else std::cerr << "no declaration of '" << terminal_safe(*table) << "'\n";
    if (!dropped) exit_code() = kExitNotHeld;
  });
}

}  // namespace sqlguard::cli
