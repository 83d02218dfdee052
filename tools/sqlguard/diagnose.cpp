#include "diagnose.h"

#include <algorithm>
#include <map>
#include <vector>

#include "text.h"

namespace sqlguard::cli {
namespace {

// Hidden commands (run-supervisor, chaos-worker) have no group: they are
// walked into but never suggested.
bool visible(const CLI::App* a) { return !a->get_group().empty(); }

std::vector<const CLI::App*> commands(const CLI::App& app) {
  return app.get_subcommands([](const CLI::App* a) { return !a->get_name().empty(); });
}

const CLI::App* command_named(const CLI::App& app, const std::string& name) {
  for (const auto* c : commands(app))
    if (c->get_name() == name) return c;
  return nullptr;
}

// "lock acquire"; "" for the root.
std::string path_of(const CLI::App* a) {
  std::string path;
  for (; a && a->get_parent(); a = a->get_parent()) path = a->get_name() + (path.empty() ? "" : " " + path);
  return path;
}

std::string quoted_list(const std::vector<std::string>& items) {
  std::string out;
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i) out += i + 1 == items.size() ? (items.size() > 2 ? ", and " : " and ") : ", ";
    out += "'" + items[i] + "'";
  }
  return out;
}

// The flag named `name` that `app` or, through fall-through, one of its
// parents takes (what CLI11 accepts at that place).
const CLI::Option* flag_at(const CLI::App* app, const std::string& name) {
  for (; app; app = app->get_parent()) {
    if (const auto* o = app->get_option_no_throw(name); o && !o->get_positional()) return o;
    if (!app->get_fallthrough()) break;
  }
  return nullptr;
}

std::vector<std::string> flag_names(const CLI::Option* o) {
  std::vector<std::string> out;
  for (const auto& l : o->get_lnames()) out.push_back("--" + l);
  for (const auto& s : o->get_snames()) out.push_back("-" + s);
  return out;
}

// Every flag valid at `app` (its own and its parents').
std::vector<std::string> flags_at(const CLI::App* app) {
  std::vector<std::string> out;
  for (; app; app = app->get_parent()) {
    for (const auto* o : app->get_options([](const CLI::Option* o) { return !o->get_positional(); }))
      for (auto& n : flag_names(o)) out.push_back(n);
    if (!app->get_fallthrough()) break;
  }
  return out;
}

// The visible commands anywhere under `app` that take flag `name` themselves.
void commands_taking(const CLI::App& app, const std::string& name, std::vector<std::string>& out) {
  for (const auto* c : commands(app)) {
    if (!visible(c)) continue;
    if (const auto* o = c->get_option_no_throw(name); o && !o->get_positional()) out.push_back(path_of(c));
    commands_taking(*c, name, out);
  }
}

// The candidate closest to `word`, if close enough to be a plausible typo:
// at most a third of the word's length away (and at least 1, at most 3).
std::optional<std::string> closest(const std::string& word, const std::vector<std::string>& candidates) {
  std::optional<std::string> best;
  std::size_t best_d = std::min<std::size_t>(3, std::max<std::size_t>(1, word.size() / 3)) + 1;
  for (const auto& c : candidates) {
    // A prefix ("acq" for "acquire") is as good as a typo.
    std::size_t d = c.rfind(word, 0) == 0 && word.size() >= 2 ? 1 : edit_distance(word, c);
    if (d < best_d) best_d = d, best = c;
  }
  return best;
}

std::vector<std::string> command_names(const CLI::App& app) {
  std::vector<std::string> out;
  for (const auto* c : commands(app))
    if (visible(c)) out.push_back(c->get_name());
  return out;
}

// Positional arguments `app` takes, and how many values each takes at most.
std::vector<std::pair<std::string, int>> positionals(const CLI::App* app) {
  std::vector<std::pair<std::string, int>> out;
  for (const auto* o : app->get_options([](const CLI::Option* o) { return o->get_positional(); }))
    out.emplace_back(o->get_name(), o->get_items_expected_max());
  return out;
}

std::string help_hint(const CLI::App* app) {
  auto p = path_of(app);
  return "see `sqlguard " + (p.empty() ? "" : p + " ") + "--help`";
}

Diagnosis unknown_command(const CLI::App* app, const std::string& word) {
  auto where = path_of(app);
  auto names = command_names(*app);
  std::string full = (where.empty() ? "" : where + " ") + word;
  std::string msg = "unknown command '" + terminal_safe(full) + "'";
  if (auto c = closest(word, names)) msg += "; did you mean '" + (where.empty() ? "" : where + " ") + *c + "'?";
  else msg += (where.empty() ? "; the commands are " : "; '" + where + "' takes ") + quoted_list(names);
  return {msg, word};
}

Diagnosis unknown_flag(const CLI::App* app, const std::string& flag) {
  std::string where = path_of(app);
  std::string msg = "unknown flag '" + terminal_safe(flag) + "'" + (where.empty() ? "" : " for '" + where + "'");
  std::vector<std::string> takers;
  commands_taking(*app, flag, takers);  // a subcommand of this one: `lock --ttl 5s`
  for (const CLI::App* up = app->get_parent(); takers.empty() && up; up = up->get_parent())
    commands_taking(*up, flag, takers);
  takers.erase(std::remove(takers.begin(), takers.end(), where), takers.end());
  if (!takers.empty()) {
    msg = "'" + flag + "' is not a flag of '" + (where.empty() ? "sqlguard" : where) + "'; " +
          (takers.size() == 1 ? "it belongs to " : "these commands take it: ") + quoted_list(takers);
  } else if (auto c = closest(flag, flags_at(app))) {
    msg += "; did you mean '" + *c + "'?";
  } else {
    msg += " (" + help_hint(app) + ")";
  }
  return {msg, flag};
}

}  // namespace

std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diag = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

std::optional<Diagnosis> diagnose(const CLI::App& root, int argc, char** argv) {
  const CLI::App* app = &root;
  std::map<std::string, int> filled;  // positional name -> values taken, for `app`
  for (int i = 1; i < argc; ++i) {
    const std::string tok = argv[i];
    if (tok == "--") return std::nullopt;  // CMD's own arguments follow
    const bool is_flag = tok.size() > 1 && tok[0] == '-' && !(tok[1] >= '0' && tok[1] <= '9');
    if (is_flag) {
      const auto eq = tok.find('=');
      const std::string name = tok.substr(0, eq);
      const CLI::Option* o = flag_at(app, name);
      if (!o) return unknown_flag(app, name);
      // Its value: CLI11 takes the next token whatever it is.
      if (eq == std::string::npos && o->get_items_expected_max() > 0 && i + 1 < argc) ++i;
      continue;
    }
    if (const auto* sub = command_named(*app, tok)) {
      app = sub;
      filled.clear();
      continue;
    }
    bool taken = false;
    for (const auto& [pname, max] : positionals(app)) {
      if (filled[pname] < max) {
        ++filled[pname];
        taken = true;
        break;
      }
    }
    if (taken) continue;
    if (!commands(*app).empty() && filled.empty()) return unknown_command(app, tok);
    // A value nothing takes: most often a flag's value put before the flag
    // (`5s --ttl`) or after a flag that takes none.
    std::string where = path_of(app);
    std::string msg = "'" + terminal_safe(tok) + "' is not expected here";
    auto ps = positionals(app);
    if (ps.empty()) msg += ": '" + (where.empty() ? "sqlguard" : where) + "' takes no arguments, only flags";
    else {
      std::vector<std::string> names;
      for (const auto& p : ps) names.push_back(p.first);
      msg += ": '" + where + "' takes " + quoted_list(names) + " once";
    }
    if (i + 1 < argc && argv[i + 1][0] == '-' && argv[i + 1] != std::string("--")) {
      const CLI::Option* next = flag_at(app, argv[i + 1]);
      if (next && next->get_items_expected_max() > 0)
        msg += "; a flag's value goes after the flag: '" + std::string(argv[i + 1]) + " " + terminal_safe(tok) + "'";
    } else if (i > 1) {
      const CLI::Option* prev = flag_at(app, argv[i - 1]);
      if (prev && prev->get_items_expected_max() == 0)
        msg += "; '" + std::string(argv[i - 1]) + "' is a switch and takes no value";
    }
    return Diagnosis{msg, tok};
  }
  if (app->get_require_subcommand_min() > 0) {
    auto where = path_of(app);
    return Diagnosis{(where.empty() ? std::string("a command is required: ") : "'" + where + "' needs a subcommand: ") +
                         quoted_list(command_names(*app)),
                     ""};
  }
  return std::nullopt;
}

}  // namespace sqlguard::cli
