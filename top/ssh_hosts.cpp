#include "top/ssh_hosts.h"

#include <fcntl.h>
#include <cctype>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <thread>

#include "ddx/errors/errors.h"
#include "top/smi_parse.h"

namespace ddx::top {
namespace {

bool valid_host(const std::string& h) {
  if (h.empty() || h.size() > 253 || h[0] == '-') return false;
  for (char c : h) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' || c == '_')) return false;
  }
  return true;
}

struct Output {
  std::string out, err;
  int status = -1;
  bool timed_out = false;
};

// Runs argv with stdout and stderr on separate pipes; kills it after `timeout`.
Output run(const std::vector<std::string>& argv, std::chrono::milliseconds timeout) {
  Output o;
  int out_pipe[2], err_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0) return o;
  if (::pipe2(err_pipe, O_CLOEXEC) != 0) {
    ::close(out_pipe[0]);
    ::close(out_pipe[1]);
    return o;
  }
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::setpgid(0, 0);
    int devnull = ::open("/dev/null", O_RDONLY);
    ::dup2(devnull, STDIN_FILENO);
    ::dup2(out_pipe[1], STDOUT_FILENO);
    ::dup2(err_pipe[1], STDERR_FILENO);
    ::execvp(args[0], args.data());
    const std::string msg = std::string("cannot run ") + args[0] + "\n";
    (void)!::write(STDERR_FILENO, msg.data(), msg.size());
    ::_exit(127);
  }
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  int open_fds = 2;
  while (open_fds > 0) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      o.timed_out = true;
      break;
    }
    if (::poll(fds, 2, static_cast<int>(left.count())) < 0) break;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      char buf[4096];
      const ssize_t n = ::read(fds[i].fd, buf, sizeof buf);
      if (n <= 0) {
        ::close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
      } else {
        (i == 0 ? o.out : o.err).append(buf, static_cast<size_t>(n));
      }
    }
  }
  for (auto& f : fds) {
    if (f.fd >= 0) ::close(f.fd);
  }
  if (o.timed_out) {
    ::kill(-pid, SIGKILL);
    ::kill(pid, SIGKILL);
  }
  ::waitpid(pid, &o.status, 0);
  return o;
}

NodeView poll_host(const std::string& host, const std::vector<std::string>& ssh, std::chrono::milliseconds timeout) {
  NodeView n;
  n.host = host;
  n.source = "ssh";
  std::vector<std::string> argv = ssh;
  argv.push_back(host);
  argv.push_back(kSmiQuery);
  const Output o = run(argv, timeout);
  if (o.timed_out) {
    n.problems.push_back("no answer within " + std::to_string(timeout.count()) + " ms");
  } else if (!WIFEXITED(o.status) || WEXITSTATUS(o.status) != 0) {
    n.problems.push_back(WIFEXITED(o.status) ? "exit status " + std::to_string(WEXITSTATUS(o.status))
                                             : "killed by a signal");
  }
  std::stringstream err(o.err);
  for (std::string line; std::getline(err, line);) {
    if (!line.empty()) n.problems.push_back("stderr: " + line);
  }
  if (!o.timed_out) {
    const SmiResult r = parse_smi_output(o.out);
    n.gpus = r.gpus;
    n.gpu_processes = r.complete ? r.processes : -1;  // unknown, not zero, when the query failed
    for (const std::string& m : r.malformed) n.problems.push_back("malformed: " + m);
  }
  if (n.gpus.empty()) n.gpu_note = "no GPU lines";
  return n;
}

}  // namespace

std::vector<std::string> read_hosts_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw UsageError("--hosts " + path + ": cannot read the file");
  std::vector<std::string> hosts;
  int number = 0;
  for (std::string line; std::getline(in, line);) {
    ++number;
    const size_t hash = line.find('#');
    if (hash != std::string::npos) line.resize(hash);
    std::stringstream words(line);
    std::string host, extra;
    if (!(words >> host)) continue;
    if ((words >> extra) || !valid_host(host)) {
      throw UsageError("--hosts " + path + " line " + std::to_string(number) + ": '" + line +
                       "' is not one host name");
    }
    hosts.push_back(host);
  }
  if (hosts.empty()) throw UsageError("--hosts " + path + " lists no host");
  return hosts;
}

std::vector<NodeView> poll_hosts(const std::vector<std::string>& hosts, const std::string& ssh_command,
                                 std::chrono::milliseconds timeout) {
  std::vector<std::string> ssh;
  std::stringstream words(ssh_command);
  for (std::string w; words >> w;) ssh.push_back(w);
  if (ssh.empty()) throw UsageError("--ssh is empty");
  std::vector<NodeView> nodes(hosts.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < hosts.size(); ++i) {
    threads.emplace_back([&, i] { nodes[i] = poll_host(hosts[i], ssh, timeout); });
  }
  for (auto& t : threads) t.join();
  return nodes;
}

}  // namespace ddx::top
