#pragma once
// The benches' command line, one parser for the three: rss's flags are taken out and checked before anything
// touches a GPU (help, listing and flag errors work on any machine); Google Benchmark's are left to it.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include "check.hpp"
#include "shapes.hpp"

namespace rss_bench {

struct Options {
  int session = 0;  // 0: suite mode (Google Benchmark's own loop, no records); N: session N of the protocol
  bool pilot = false;
  bool list_tests = false;  // --benchmark_list_tests: names only
  int rounds = 10, iterations = 30, warmup = 5;
  std::uint64_t seed = 1, fixture_seed = 42;
  std::string shape_order = "forward", out = "records.json", shapes, dtypes = "fp32";
  std::map<std::string, std::string> extra;  // a suite's own flags, by name, as given
  std::vector<Shape> selected;               // --shapes x --dtypes, in --shape-order
};

inline Options g_options;

/// A bench program: its name, its suite and its defaults of the shared flags (run_suite puts them into g_options
/// before the flags are read; --help shows them).
struct Program {
  const char* name;   // messages, --help, the records' context.producer
  const char* suite;  // forward | backward | sharded: the records' context.suite
  const char* shapes;
  const char* dtypes;
  int rounds, iterations, warmup;
  const char* out;
};

// The three programs side by side, as docs/protocol.md lists their defaults.
inline constexpr Program forward_program{
    "rss_bench", "forward", forward_shapes, "fp32,bf16,fp16", 10, 30, 5, "records.json"};
inline constexpr Program backward_program{
    "rss_backward_bench", "backward", backward_shapes, "fp32,bf16", 3, 50, 10, "rss_backward.json"};
inline constexpr Program sharded_program{
    "rss_sharded_bench", "sharded", sharded_shapes, "fp32,bf16", 5, 20, 5, "sharded_records.json"};

/// A suite's own valued flag: its name ("--check"), the form of its value in --help ("0|1"), its help text, and a
/// check of a value ("" when good).
struct ExtraFlag {
  std::string name, value, help;
  std::function<std::string(const std::string&)> check;
};

/// A flag error: says what is wrong and exits with code 2 (before any device work).
[[noreturn]] inline void bad_flag(const std::string& message) {
  std::fprintf(stderr, "%s: %s (%s --help lists the flags)\n", program_name, message.c_str(), program_name);
  std::exit(2);
}

/// The whole of `text` as an integer in [lo, hi], or "" when it is not.
inline std::string integer_error(const std::string& text, long long lo, long long hi, long long* out) {
  errno = 0;
  char* end = nullptr;
  *out = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno == ERANGE || *out < lo || *out > hi) {
    return "wants an integer from " + std::to_string(lo) + " to " + std::to_string(hi) + ", got '" + text + "'";
  }
  return "";
}

inline int integer_flag(const char* name, const std::string& text, long long lo, long long hi) {
  long long v = 0;
  const std::string error = integer_error(text, lo, hi, &v);
  if (!error.empty()) bad_flag(std::string(name) + " " + error);
  return static_cast<int>(v);
}

inline std::uint64_t seed_flag(const char* name, const std::string& text) {
  errno = 0;
  char* end = nullptr;
  const unsigned long long v = std::strtoull(text.c_str(), &end, 10);
  if (text.empty() || text[0] == '-' || *end != '\0' || errno == ERANGE) {
    bad_flag(std::string(name) + " wants an unsigned 64-bit integer, got '" + text + "'");
  }
  return v;
}

/// "--name=value", or "--name value" (the next argument, consumed) -> value.
inline bool take_option(int* i, int argc, char** argv, const char* name, std::string* value) {
  const char* arg = argv[*i];
  const std::size_t n = std::strlen(name);
  if (std::strncmp(arg, name, n) != 0 || (arg[n] != '=' && arg[n] != '\0')) return false;
  if (arg[n] == '=') {
    *value = arg + n + 1;
  } else if (*i + 1 < argc) {
    *value = argv[++*i];
  } else {
    bad_flag(std::string(name) + " needs a value: " + name + "=...");
  }
  return true;
}

/// A Google Benchmark boolean flag given bare or as =true/1/yes (its own spelling).
inline bool bool_flag_set(const char* arg, const char* name) {
  const std::size_t n = std::strlen(name);
  if (std::strncmp(arg, name, n) != 0) return false;
  if (arg[n] == '\0') return true;
  if (arg[n] != '=') return false;
  const std::string v = arg + n + 1;
  return v == "true" || v == "1" || v == "yes" || v == "t" || v == "y" || v == "on";
}

/// A bad --benchmark_filter is a flag error before the device check (Google Benchmark would report it only once
/// benchmarks are registered, after the device check). Its syntax: an extended regular expression, negated by a
/// leading '-'.
inline void check_filter(const std::string& filter) {
  const std::string pattern = !filter.empty() && filter[0] == '-' ? filter.substr(1) : filter;
  try {
    std::regex(pattern, std::regex::extended);
  } catch (const std::regex_error& e) {
    bad_flag("--benchmark_filter '" + filter + "' is not a valid regular expression (" + e.what() + ")");
  }
}

/// Takes rss's flags out of argv into g_options (defaults: g_options as the suite set it) and checks them, leaving
/// Google Benchmark's (and unknown ones, which benchmark::ReportUnrecognizedArguments rejects once Google Benchmark
/// has taken its own). Returns true when help was asked for.
inline bool parse_options(int* argc, char** argv, const std::vector<ExtraFlag>& extra, bool has_pilot) {
  Options& o = g_options;
  int kept = 1;
  bool help = false, out_given = false;
  for (int i = 1; i < *argc; ++i) {
    const char* arg = argv[i];
    std::string v;
    if (std::strcmp(arg, "--help") == 0 || std::strcmp(arg, "-h") == 0) help = true;
    else if (has_pilot && std::strcmp(arg, "--pilot") == 0) o.pilot = true;
    else if (take_option(&i, *argc, argv, "--session", &v)) o.session = integer_flag("--session", v, 1, 1 << 20);
    else if (take_option(&i, *argc, argv, "--rounds", &v)) o.rounds = integer_flag("--rounds", v, 1, 1 << 20);
    else if (take_option(&i, *argc, argv, "--iterations", &v) || take_option(&i, *argc, argv, "--samples", &v))
      o.iterations = integer_flag("--iterations", v, 1, 1 << 24);
    else if (take_option(&i, *argc, argv, "--warmup", &v)) o.warmup = integer_flag("--warmup", v, 0, 1 << 24);
    else if (take_option(&i, *argc, argv, "--seed", &v)) o.seed = seed_flag("--seed", v);
    else if (take_option(&i, *argc, argv, "--fixture-seed", &v)) o.fixture_seed = seed_flag("--fixture-seed", v);
    else if (take_option(&i, *argc, argv, "--shape-order", &v)) {
      if (v != "forward" && v != "reverse") bad_flag("--shape-order wants forward or reverse, got '" + v + "'");
      o.shape_order = v;
    } else if (take_option(&i, *argc, argv, "--shapes", &v)) {
      if (v.empty()) bad_flag("--shapes needs at least one ROWSxCOLS");
      o.shapes = v;
    } else if (take_option(&i, *argc, argv, "--dtypes", &v)) {
      o.dtypes = v;
    } else if (take_option(&i, *argc, argv, "--out", &v)) {
      if (v.empty()) bad_flag("--out needs a file name");
      o.out = v;
      out_given = true;
    } else {
      bool taken = false;
      for (const ExtraFlag& f : extra) {
        if (!taken && take_option(&i, *argc, argv, f.name.c_str(), &v)) {
          const std::string error = f.check(v);
          if (!error.empty()) bad_flag(f.name + " " + error);
          o.extra[f.name] = v;
          taken = true;
        }
      }
      if (taken) continue;
      if (bool_flag_set(arg, "--benchmark_list_tests")) o.list_tests = true;
      const char* filter = "--benchmark_filter=";
      if (std::strncmp(arg, filter, std::strlen(filter)) == 0) check_filter(arg + std::strlen(filter));
      argv[kept++] = argv[i];
    }
  }
  *argc = kept;
  if (out_given && o.session == 0) o.session = 1;  // records asked for: a session
  const std::string error = parse_shapes(o.shapes, o.dtypes, &o.selected);
  if (!error.empty()) bad_flag(error);
  if (o.shape_order == "reverse") std::reverse(o.selected.begin(), o.selected.end());
  return help;
}

/// Where the shared flags' texts start in --help.
inline constexpr std::size_t help_text_column = 25;

/// A suite's flag in --help: the flag in the column of the shared ones, its text beside it, the text's later lines
/// indented to that column (so a suite's texts carry no layout).
inline void print_flag(const std::string& flag, const std::string& text) {
  const std::string column(help_text_column, ' ');
  std::string indented;
  for (const char c : text) indented += c == '\n' ? "\n" + column : std::string(1, c);
  std::printf("  %-22s %s\n", flag.c_str(), indented.c_str());
}

/// A comma list printed from `column` on: broken after a comma where it would pass `width`, each later line indented
/// to the shared flags' text column (a suite's default shape list is longer than one line).
inline std::string wrap_list(const std::string& list, std::size_t column, std::size_t width = 112) {
  std::string out, line;
  std::size_t start = 0;
  while (start <= list.size()) {
    std::size_t comma = list.find(',', start);
    const std::string item = list.substr(start, comma == std::string::npos ? std::string::npos : comma + 1 - start);
    if (!line.empty() && column + line.size() + item.size() > width) {
      out += line + "\n" + std::string(help_text_column, ' ');
      line.clear();
      column = help_text_column;
    }
    line += item;
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out + line;
}

/// The flags every suite shares, with this suite's defaults, then its own; then Google Benchmark's. `about` follows
/// "PROGRAM: ".
inline void print_help(const char* about, const std::string& pilot_help, const std::vector<ExtraFlag>& extra,
                       const Options& d) {
  std::printf("%s: %s\n\nUsage: %s [%s flags] [Google Benchmark flags]\n\n", program_name, about, program_name,
              program_name);
  std::printf(
      "Without --session or --out: suite mode, every shape x variant in Google Benchmark's own loop (its flags apply:\n"
      "--benchmark_filter, --benchmark_format, ...), no records. With --session=N (or --out=FILE: session 1): one\n"
      "session of the project's protocol (docs/protocol.md): per shape, rounds; per round every variant once, in an\n"
      "order shuffled from the recorded seed; every sample written to --out as Google Benchmark's JSON with the\n"
      "session's context (schema rss-records/2, read by bench/rssbench).\n\n"
      "%s flags (each valued flag as --flag=value or --flag value):\n"
      "  --session=N            session number, N >= 1 (default: none, suite mode)\n"
      "  --out=FILE             the session's records (default %s; gives session 1 when --session is absent)\n"
      "  --rounds=N             rounds per shape, N >= 1 (default %d; sessions)\n"
      "  --iterations=N         host samples per variant and round, N >= 1 (default %d; sessions); --samples=N too\n"
      "  --warmup=N             unrecorded warm calls before each measurement, N >= 0 (default %d)\n"
      "  --seed=N               seed of the per-round shuffles, recorded (default %llu)\n"
      "  --fixture-seed=N       seed of the input fixture, recorded (default %llu)\n"
      "  --shape-order=ORDER    forward or reverse (default forward; session 2 uses reverse)\n"
      "  --shapes=LIST          comma list of ROWSxCOLS[:fp32|bf16|fp16]; a bare ROWSxCOLS runs in every --dtypes\n"
      "                         type (default: %s)\n"
      "  --dtypes=LIST          storage types of the bare shapes, comma list of fp32, bf16, fp16 (default %s)\n",
      program_name, d.out.c_str(), d.rounds, d.iterations, d.warmup, static_cast<unsigned long long>(d.seed),
      static_cast<unsigned long long>(d.fixture_seed), wrap_list(d.shapes, 40).c_str(), d.dtypes.c_str());
  if (!pilot_help.empty()) print_flag("--pilot", pilot_help);
  for (const ExtraFlag& f : extra) print_flag(f.name + "=" + f.value, f.help);
  std::printf(
      "  --help, -h             this help (needs no GPU)\n\n"
      "Main metric: host completion time of a warm call (launch to completion seen on the host), one sample per\n"
      "call; where a suite has it, one batched CUDA event interval per round (device_us).\n\n"
      "Exit codes: 0 done, 1 a CUDA, NCCL or file error, 2 bad flags or no CUDA device.\n\nGoogle Benchmark's flags:\n");
  std::fflush(stdout);
  benchmark::PrintDefaultHelp();
}

}  // namespace rss_bench
