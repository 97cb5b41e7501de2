// A worker for the launcher's and error reports' tests: does one fault on request, so tests
// can check what `ddx launch` and the error handlers make of it.
//   --segv                  null-pointer write in crash_with_null_write()
//   --throw MSG             uncaught std::runtime_error(MSG) from throw_uncaught()
//   --exit N                exit code N
//   --verdict N MSG         a job's verdict: write MSG into the error file as the verdict
//                           (ddx/errors/verdict.h), then exit N
//   --stagger S             rank R waits R * S seconds more before its fault (ranks exit in turn)
//   --fail-first-attempt    exit 1 when TORCHELASTIC_RESTART_COUNT is 0, else 0
//   --sleep S               sleep S seconds (after the fault checks; the default action)
//   --spawn-grandchild FILE fork a grandchild that leaves the process group (setsid) and
//                           sleeps; append its pid (and ours) to FILE
//   --pid-file FILE         append this worker's pid to FILE
//   --print-env             print RANK, WORLD_SIZE, ... one per line as KEY=VALUE
//   --fault-after S         wait S seconds before the fault (lets the other ranks start)
//   --ignore-sigterm        ignore SIGTERM (so a rank's own exit, not the launcher's stop,
//                           ends it even after another rank failed)
//   --only-rank R           apply --segv/--throw/--exit only on rank R; other ranks sleep
//                           (so they are alive when the launcher stops the group)
#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>

#include "ddx/errors/error_report.h"
#include "ddx/errors/verdict.h"

namespace {

struct Args {
  bool segv = false;
  const char* throw_message = nullptr;
  int exit_code = -1;
  int verdict_code = -1;
  const char* verdict_message = nullptr;
  double stagger_s = 0;
  bool fail_first_attempt = false;
  double sleep_s = 0;
  const char* grandchild_file = nullptr;
  const char* pid_file = nullptr;
  bool print_env = false;
  bool ignore_sigterm = false;
  int only_rank = -1;
  double fault_after_s = 0;
};

int env_int(const char* name, int fallback) {
  const char* value = std::getenv(name);
  return value && *value ? std::atoi(value) : fallback;
}

void append_line(const char* path, const std::string& line) {
  int fd = ::open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return;
  std::string text = line + "\n";
  ssize_t unused = ::write(fd, text.data(), text.size());
  (void)unused;
  ::close(fd);
}

// Read through a volatile so the compiler cannot see the null and turn the write into a trap.
int* volatile g_null_target = nullptr;

// Named, neither inlined nor cloned: the tests look for these names in the reported stack.
__attribute__((noinline, noclone)) void crash_with_null_write() {
  *g_null_target = 42;
}

__attribute__((noinline, noclone)) void throw_uncaught(const char* message) {
  throw std::runtime_error(message);
}

void spawn_grandchild(const char* file) {
  pid_t pid = ::fork();
  if (pid == 0) {
    ::setsid();  // leaves the workers' process group: only the subreaper can find it
    for (;;) ::pause();
  }
  append_line(file, std::to_string(pid));
}

void print_env() {
  for (const char* key : {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK",
                          "GROUP_WORLD_SIZE", "ROLE_RANK", "ROLE_WORLD_SIZE", "MASTER_ADDR",
                          "MASTER_PORT", "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_MAX_RESTARTS",
                          "TORCHELASTIC_RUN_ID", "TORCHELASTIC_ERROR_FILE", "DDX_LAUNCH",
                          "OMP_NUM_THREADS"}) {
    const char* value = std::getenv(key);
    std::printf("%s=%s\n", key, value ? value : "<unset>");
  }
  // The store socket the launcher hands rank 0: is the fd really open and listening here?
  if (const char* fd = std::getenv("DDX_STORE_LISTEN_FD")) {
    int listening = 0;
    socklen_t len = sizeof listening;
    const bool ok = ::getsockopt(std::atoi(fd), SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) == 0 && listening;
    std::printf("DDX_STORE_LISTEN_FD=%s (%s)\n", fd, ok ? "listening" : "not a listening socket");
  } else {
    std::printf("DDX_STORE_LISTEN_FD=<unset>\n");
  }
  std::fflush(stdout);
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "test_worker: %s needs a value\n", flag.c_str());
        std::exit(64);
      }
      return argv[++i];
    };
    if (flag == "--segv") a.segv = true;
    else if (flag == "--throw") a.throw_message = next();
    else if (flag == "--exit") a.exit_code = std::atoi(next());
    else if (flag == "--verdict") {
      a.verdict_code = std::atoi(next());
      a.verdict_message = next();
    }
    else if (flag == "--stagger") a.stagger_s = std::atof(next());
    else if (flag == "--fail-first-attempt") a.fail_first_attempt = true;
    else if (flag == "--sleep") a.sleep_s = std::atof(next());
    else if (flag == "--spawn-grandchild") a.grandchild_file = next();
    else if (flag == "--pid-file") a.pid_file = next();
    else if (flag == "--print-env") a.print_env = true;
    else if (flag == "--ignore-sigterm") a.ignore_sigterm = true;
    else if (flag == "--only-rank") a.only_rank = std::atoi(next());
    else if (flag == "--fault-after") a.fault_after_s = std::atof(next());
    else {
      std::fprintf(stderr, "test_worker: unknown flag %s\n", flag.c_str());
      std::exit(64);
    }
  }
  return a;
}

}  // namespace

int main(int argc, char** argv) {
  ddx::install_error_handlers();
  Args args = parse(argc, argv);
  int rank = env_int("RANK", 0);
  if (args.ignore_sigterm) ::signal(SIGTERM, SIG_IGN);
  // Grandchild first: once a test sees this worker's pid, its grandchild's is recorded too.
  if (args.grandchild_file) spawn_grandchild(args.grandchild_file);
  if (args.pid_file) append_line(args.pid_file, std::to_string(::getpid()));
  if (args.print_env) print_env();
  std::printf("test_worker rank %d started\n", rank);
  std::fflush(stdout);

  bool faulty_rank = args.only_rank < 0 || args.only_rank == rank;
  if (faulty_rank) {
    // Lets the other ranks finish starting (pid files, grandchildren) before the fault.
    if (args.fault_after_s > 0 || args.stagger_s > 0) {
      std::this_thread::sleep_for(std::chrono::duration<double>(args.fault_after_s + rank * args.stagger_s));
    }
    if (args.segv) crash_with_null_write();
    if (args.throw_message) throw_uncaught(args.throw_message);
    if (args.verdict_message) {
      ddx::write_verdict_report(args.verdict_message, args.verdict_code);
      return args.verdict_code;
    }
    if (args.exit_code >= 0) {
      std::fprintf(stderr, "test_worker: rank %d exiting with code %d\n", rank, args.exit_code);
      return args.exit_code;
    }
    if (args.fail_first_attempt && env_int("TORCHELASTIC_RESTART_COUNT", 0) == 0) {
      std::fprintf(stderr, "test_worker: rank %d failing its first attempt\n", rank);
      return 1;
    }
  } else if (args.segv || args.throw_message || args.exit_code >= 0 || args.verdict_message) {
    // The healthy ranks of a faulty job: alive until the launcher stops them.
    if (args.sleep_s <= 0) args.sleep_s = 60;
  }
  if (args.sleep_s > 0) {
    std::this_thread::sleep_for(std::chrono::duration<double>(args.sleep_s));
  }
  return 0;
}
