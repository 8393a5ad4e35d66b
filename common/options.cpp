#include "common/options.h"

#include <algorithm>
#include <cstdio>

#include "common/check.h"

namespace cce {
namespace {

int64_t parse_int(const std::string& name, const std::string& text) {
  size_t used = 0;
  int64_t value = 0;
  try {
    value = std::stoll(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || text.empty()) throw InputError("--" + name + " expects an integer, got '" + text + "'");
  return value;
}

double parse_double(const std::string& name, const std::string& text) {
  size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || text.empty()) throw InputError("--" + name + " expects a number, got '" + text + "'");
  return value;
}

}  // namespace

void OptionParser::add_flag(const std::string& name, bool* target, const std::string& help) {
  options_.push_back({name, help, "flag", "", [target](const std::string&) { *target = true; }});
}
void OptionParser::add_int(const std::string& name, int64_t* target, const std::string& help) {
  options_.push_back({name, help, "int", std::to_string(*target),
                      [name, target](const std::string& v) { *target = parse_int(name, v); }});
}
void OptionParser::add_double(const std::string& name, double* target, const std::string& help) {
  char def[32];
  std::snprintf(def, sizeof def, "%g", *target);  // what std::ostream prints by default
  options_.push_back({name, help, "number", def,
                      [name, target](const std::string& v) { *target = parse_double(name, v); }});
}
void OptionParser::add_string(const std::string& name, std::string* target, const std::string& help) {
  options_.push_back({name, help, "text", *target, [target](const std::string& v) { *target = v; }});
}

bool OptionParser::parse(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::printf("%s", usage().c_str());
      return false;
    }
    if (arg.rfind("--", 0) != 0) throw InputError("unexpected argument '" + arg + "' (flags start with --)");
    std::string name = arg.substr(2), value;
    size_t eq = name.find('=');
    bool has_inline_value = eq != std::string::npos;
    if (has_inline_value) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    }
    auto it = std::find_if(options_.begin(), options_.end(), [&](const Option& o) { return o.name == name; });
    if (it == options_.end()) throw InputError("unknown flag '--" + name + "' (see --help)");
    if (it->kind == "flag") {
      if (has_inline_value) throw InputError("--" + name + " takes no value");
    } else if (!has_inline_value) {
      if (i + 1 >= argc) throw InputError("--" + name + " needs a value");
      value = argv[++i];
    }
    it->set(value);
    set_.push_back(name);
  }
  return true;
}

bool OptionParser::was_set(const std::string& name) const {
  return std::find(set_.begin(), set_.end(), name) != set_.end();
}

std::string OptionParser::usage() const {
  std::string text = "usage: " + program_ + " [options]\n";
  for (const auto& o : options_) {
    std::string left = "  --" + o.name + (o.kind == "flag" ? "" : " <" + o.kind + ">");
    left.resize(std::max<size_t>(left.size() + 1, 26), ' ');
    text += left + o.help;
    if (o.kind != "flag" && !o.default_text.empty()) text += " (default " + o.default_text + ")";
    text += "\n";
  }
  return text;
}

void add_shape_options(OptionParser& parser, int64_t* n, int64_t* d, int64_t* v, const std::string& n_help) {
  parser.add_int("n", n, n_help);
  parser.add_int("d", d, "hidden size D");
  parser.add_int("v", v, "vocabulary size V");
}

}  // namespace cce
