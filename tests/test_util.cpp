#include "tests/test_util.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <stdexcept>

namespace moeedb::test {

std::string DataDir() { return MOEEDB_TEST_DATA_DIR; }
std::string Data(const std::string& rel) { return DataDir() + "/" + rel; }
std::string Binary() { return MOEEDB_BINARY; }

TempDir::TempDir() {
  char tmpl[] = "/tmp/moeedb-test-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) throw std::runtime_error("mkdtemp failed");
  path_ = tmpl;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

CommandResult Run(const std::vector<std::string>& args, const std::string& input) {
  int in_pipe[2], out_pipe[2], err_pipe[2];
  if (pipe(in_pipe) || pipe(out_pipe) || pipe(err_pipe)) throw std::runtime_error("pipe failed");
  pid_t pid = fork();
  if (pid == 0) {
    dup2(in_pipe[0], 0);
    dup2(out_pipe[1], 1);
    dup2(err_pipe[1], 2);
    for (int fd : {in_pipe[0], in_pipe[1], out_pipe[0], out_pipe[1], err_pipe[0], err_pipe[1]}) close(fd);
    std::vector<char*> argv;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  close(in_pipe[0]);
  close(out_pipe[1]);
  close(err_pipe[1]);
  signal(SIGPIPE, SIG_IGN);
  CommandResult r;
  size_t written = 0;
  int in_fd = in_pipe[1];
  if (input.empty()) { close(in_fd); in_fd = -1; }
  bool out_open = true, err_open = true;
  char buf[65536];
  while (out_open || err_open) {
    std::vector<pollfd> fds;
    if (out_open) fds.push_back({out_pipe[0], POLLIN, 0});
    if (err_open) fds.push_back({err_pipe[0], POLLIN, 0});
    if (in_fd >= 0) fds.push_back({in_fd, POLLOUT, 0});
    if (poll(fds.data(), fds.size(), -1) < 0) break;
    for (const auto& p : fds) {
      if (p.fd == in_fd && (p.revents & (POLLOUT | POLLERR | POLLHUP))) {
        ssize_t n = write(in_fd, input.data() + written, std::min<size_t>(65536, input.size() - written));
        if (n > 0) written += static_cast<size_t>(n);
        if (n < 0 || written == input.size()) { close(in_fd); in_fd = -1; }
      } else if (p.revents & (POLLIN | POLLHUP | POLLERR)) {
        ssize_t n = read(p.fd, buf, sizeof(buf));
        if (n <= 0) {
          if (p.fd == out_pipe[0]) out_open = false; else err_open = false;
        } else {
          (p.fd == out_pipe[0] ? r.out : r.err).append(buf, static_cast<size_t>(n));
        }
      }
    }
  }
  if (in_fd >= 0) close(in_fd);
  close(out_pipe[0]);
  close(err_pipe[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) r.signal = WTERMSIG(status);
  return r;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void WriteFile(const std::string& path, const std::string& data) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << data;
}

void WriteF32Safetensors(const std::string& path,
                         const std::map<std::string, std::pair<std::vector<int64_t>, std::vector<float>>>& tensors) {
  nlohmann::json h = nlohmann::json::object();
  uint64_t off = 0;
  for (const auto& [name, t] : tensors) {
    const uint64_t n = t.second.size() * 4;
    h[name] = {{"dtype", "F32"}, {"shape", t.first}, {"data_offsets", {off, off + n}}};
    off += n;
  }
  std::string hs = h.dump();
  while (hs.size() % 8) hs += ' ';
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  uint64_t len = hs.size();
  out.write(reinterpret_cast<const char*>(&len), 8);
  out << hs;
  for (const auto& [name, t] : tensors)
    out.write(reinterpret_cast<const char*>(t.second.data()), static_cast<std::streamsize>(t.second.size() * 4));
}

}  // namespace moeedb::test
