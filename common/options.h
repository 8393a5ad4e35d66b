// A small command-line parser: --name value and --flag, with typed targets,
// help text, and a one-line InputError for anything it does not know.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace cce {

class OptionParser {
 public:
  explicit OptionParser(std::string program) : program_(std::move(program)) {}
  void add_flag(const std::string& name, bool* target, const std::string& help);
  void add_int(const std::string& name, int64_t* target, const std::string& help);
  void add_double(const std::string& name, double* target, const std::string& help);
  void add_string(const std::string& name, std::string* target, const std::string& help);
  // Throws InputError on an unknown flag, a missing value or a malformed number.
  // Returns false when --help was given (the usage has been printed).
  bool parse(int argc, char** argv);
  std::string usage() const;
  bool was_set(const std::string& name) const;

 private:
  struct Option {
    std::string name, help, kind, default_text;
    std::function<void(const std::string&)> set;
  };
  std::string program_;
  std::vector<Option> options_;
  std::vector<std::string> set_;
};

// --n, --d, --v: the problem size, the same three flags in every program.
void add_shape_options(OptionParser& parser, int64_t* n, int64_t* d, int64_t* v,
                       const std::string& n_help = "tokens N");

}  // namespace cce
