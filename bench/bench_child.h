// What the benchmarks that measure in child processes share: their --flag
// value pairs, and running a child (the benchmark itself, re-executed with
// --child WHAT, so each measurement has its own peak RSS and kernel choice)
// that prints one JSON object.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

namespace moeedb::bench {

class BenchFlags {
 public:
  // argv as --name value pairs; `program` names the benchmark in errors.
  // Every pair but --child is kept to pass on to children.
  // The last one made is the process's: Flag, IntFlag and Die below read it.
  BenchFlags(const char* program, int argc, char** argv) : program_(program) {
    Current() = this;
    for (int i = 1; i < argc; i += 2) {
      const std::string a = argv[i];
      if (a.rfind("--", 0) != 0 || i + 1 >= argc) Die("usage: see the comment at the top of bench/" + program_ + ".cpp");
      values_[a.substr(2)] = argv[i + 1];
      if (a != "--child") passed_.insert(passed_.end(), {a, argv[i + 1]});
    }
  }
  std::string Get(const std::string& name, const std::string& def = "") const {
    auto it = values_.find(name);
    return it == values_.end() ? def : it->second;
  }
  int64_t Int(const std::string& name, int64_t def) const { return std::stoll(Get(name, std::to_string(def))); }

  [[noreturn]] void Die(const std::string& message) const {
    std::fprintf(stderr, "%s: %s\n", program_.c_str(), message.c_str());
    std::exit(1);
  }

  // Runs this program again with the same flags and --child what; returns
  // the JSON it printed. A child that fails ends the benchmark.
  nlohmann::json RunChild(const std::string& what) const {
    char self[4096];
    const ssize_t len = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (len <= 0) Die("readlink /proc/self/exe");
    self[len] = 0;
    std::fflush(stdout);  // or the child inherits what the parent has not written yet
    int fds[2];
    if (pipe(fds) != 0) Die("pipe");
    const pid_t pid = fork();
    if (pid == 0) {
      dup2(fds[1], 1);
      close(fds[0]);
      std::vector<std::string> args = passed_;
      args.insert(args.end(), {"--child", what});
      std::vector<char*> argv{self};
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(self, argv.data());
      _exit(127);
    }
    close(fds[1]);
    std::string out;
    char buf[4096];
    for (ssize_t got; (got = read(fds[0], buf, sizeof(buf))) > 0;) out.append(buf, static_cast<size_t>(got));
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) Die("child '" + what + "' failed");
    return nlohmann::json::parse(out);
  }

  static const BenchFlags*& Current() {
    static const BenchFlags* flags = nullptr;
    return flags;
  }

 private:
  std::string program_;
  std::map<std::string, std::string> values_;
  std::vector<std::string> passed_;
};

// The process's flags (the BenchFlags main made).
inline std::string Flag(const std::string& name, const std::string& def = "") {
  return BenchFlags::Current()->Get(name, def);
}
inline int64_t IntFlag(const std::string& name, int64_t def) { return BenchFlags::Current()->Int(name, def); }
[[noreturn]] inline void Die(const std::string& message) { BenchFlags::Current()->Die(message); }

// The items of a comma-separated flag value, empty ones left out.
inline std::vector<std::string> Split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

// The median of a benchmark's repeats (NaN for none).
inline double Median(std::vector<double> v) {
  if (v.empty()) return std::nan("");
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// A child's configuration word, "dtype:quant:routing" (e.g. "bf16::top1");
// parts left out are empty.
struct ConfigWord {
  std::string dtype, quant, routing;
};
inline ConfigWord ParseConfigWord(const std::string& word) {
  ConfigWord w;
  std::stringstream ss(word);
  std::getline(ss, w.dtype, ':');
  std::getline(ss, w.quant, ':');
  std::getline(ss, w.routing, ':');
  return w;
}

// Every kernel switch set as on a CPU with AVX2 and no AVX-512 (int8,
// attention, rows GEMM, router, bf16 on its AVX2 path under f32 compute).
// The engine reads each once, at its first use: call before any forward.
inline void CapKernelsAtAvx2() {
  for (const char* name : {"MOEEDB_INT8_GEMM", "MOEEDB_ATTENTION_KERNEL", "MOEEDB_ROWS_GEMM", "MOEEDB_ROUTER_KERNEL",
                           "MOEEDB_BF16_GEMM"})
    setenv(name, "avx2", 1);
  setenv("MOEEDB_BF16_COMPUTE", "off", 1);
}

}  // namespace moeedb::bench
