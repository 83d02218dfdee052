// Names the mistake of a command line CLI11 refused: an unknown command or
// flag with the closest valid one, a flag given to a command that does not
// take it with the commands that do, a value in the wrong place. CLI11's own
// messages ("A subcommand is required", "The following arguments were not
// expected: 5s --ttl") say that something is wrong, not what.
#pragma once

#include <CLI/CLI.hpp>

#include <optional>
#include <string>

namespace sqlguard::cli {

struct Diagnosis {
  std::string message;   // one line, e.g. "unknown command 'migrat'; did you mean 'migrate'?"
  std::string argument;  // the token at fault ("migrat", "--tll"); JSON `argument`
};

// Walks argv through `root`'s command tree the way CLI11 does and returns the
// first mistake it can name, or nullopt when it finds none (then CLI11's
// message stands: a missing required value, a value a check refused...).
std::optional<Diagnosis> diagnose(const CLI::App& root, int argc, char** argv);

// Levenshtein distance (byte-wise): how "did you mean" picks its candidate.
std::size_t edit_distance(const std::string& a, const std::string& b);

}  // namespace sqlguard::cli
