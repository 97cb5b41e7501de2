// Fatal-error reporting: signal handlers on an alternate stack and a std::terminate handler
// that print a symbolized, rank-prefixed trace and write $TORCHELASTIC_ERROR_FILE, then let the
// process die of the original signal so launchers see the real cause in the exit status.
#include "ddx/errors/error_report.h"

#include <cxxabi.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <sstream>
#include <string>

#include "bus_error_cause.h"
#include "ddx/watchdog/job_events.h"
#include "ddx/errors/verdict.h"
#include "error_file.h"
#include "stack_capture.h"

namespace ddx {
namespace {

constexpr int kFatalSignals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
// Symbolizing through libdw needs far more than SIGSTKSZ; a stack overflow leaves us only this.
constexpr size_t kAltStackSize = 1 << 20;

std::atomic<int> g_rank{-1}, g_local_rank{-1}, g_world_size{-1};
// The thread that is writing a report (0: none). A second fatal error on that thread means the
// handler itself crashed; on another thread it must wait instead of killing the process early.
std::atomic<long> g_reporting_thread{0};
// Set once the terminate handler has reported; its abort() must not report a second time.
std::atomic<bool> g_report_done{false};

// Address space held back for the report: symbolizing through libdw allocates, and when the
// rank died of running out of memory (std::bad_alloc under an address-space limit such as
// `ulimit -v` or a scheduler's memory cap) libdw's own allocation failure would exit(1) the
// process with no report and the wrong exit status. Reserved, never touched, so it costs no memory.
constexpr size_t kReportReserve = 64u << 20;
void* g_report_reserve = MAP_FAILED;

void release_memory_for_the_report() {
  if (g_report_reserve != MAP_FAILED) ::munmap(g_report_reserve, kReportReserve);  // async-signal-safe
  g_report_reserve = MAP_FAILED;
  struct rlimit limit {};
  if (::getrlimit(RLIMIT_AS, &limit) == 0 && limit.rlim_cur != limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;  // a soft cap may be lifted up to the hard one
    ::setrlimit(RLIMIT_AS, &limit);
  }
}

long current_thread_id() { return static_cast<long>(::syscall(SYS_gettid)); }

int env_int(const char* name) {
  const char* value = std::getenv(name);
  if (!value || !*value) return -1;
  char* end = nullptr;
  long parsed = std::strtol(value, &end, 10);
  return (*end == '\0' && parsed >= 0) ? static_cast<int>(parsed) : -1;
}

std::string hostname() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0) return "unknown";
  return name;
}

void write_stderr(const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(STDERR_FILENO, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    done += static_cast<size_t>(n);
  }
}

// "[rank 3/8 host:pid]" like ddx's log lines, so the trace is attributable on a shared console.
std::string rank_prefix(const detail::ErrorReport& r) {
  std::ostringstream out;
  out << "[";
  if (r.rank >= 0) {
    out << "rank " << r.rank;
    if (r.world_size > 0) out << "/" << r.world_size;
  } else {
    out << "ddx";
  }
  out << " " << r.host << ":" << r.pid << "] ";
  return out.str();
}

void print_report(const detail::ErrorReport& r) {
  std::string prefix = rank_prefix(r);
  std::ostringstream out;
  std::istringstream message(r.message);
  std::string line;
  std::getline(message, line);
  out << prefix << "F fatal: " << line << "\n";
  while (std::getline(message, line)) out << prefix << "F        " << line << "\n";
  std::istringstream lines(detail::format_stack(r.frames));
  while (std::getline(lines, line)) out << prefix << "F   " << line << "\n";
  const char* error_file = std::getenv("TORCHELASTIC_ERROR_FILE");
  if (error_file && *error_file) out << prefix << "F error file: " << error_file << "\n";
  // One write: lines of concurrent ranks sharing a terminal stay together.
  write_stderr(out.str());
}

detail::ErrorReport make_report(std::string message, int exit_code) {
  detail::ErrorReport r;
  r.message = std::move(message);
  r.exit_code = exit_code;
  r.rank = g_rank.load();
  r.local_rank = g_local_rank.load();
  r.world_size = g_world_size.load();
  r.host = hostname();
  r.pid = static_cast<int>(::getpid());
  return r;
}

void publish(const detail::ErrorReport& r) {
  print_report(r);
  const char* path = std::getenv("TORCHELASTIC_ERROR_FILE");
  if (path && *path && !detail::write_file_atomically(path, detail::error_report_to_json(r))) {
    write_stderr(rank_prefix(r) + "E could not write error file " + path + ": " +
                 std::strerror(errno) + "\n");
  }
}

[[noreturn]] void die_with(int signo) {
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  ::sigaction(signo, &dfl, nullptr);
  sigset_t unblock;
  sigemptyset(&unblock);
  sigaddset(&unblock, signo);
  ::pthread_sigmask(SIG_UNBLOCK, &unblock, nullptr);
  ::raise(signo);
  ::_exit(128 + signo);  // only if the signal was somehow ignored
}

// Returns false when another report is in progress (or this thread crashed while reporting).
bool begin_report() {
  long self = current_thread_id();
  long expected = 0;
  if (g_reporting_thread.compare_exchange_strong(expected, self)) {
    release_memory_for_the_report();
    return true;
  }
  if (expected != self) ::sleep(30);  // let the first thread finish its report and kill us all
  return false;
}

std::string describe_signal(int signo, const siginfo_t* info) {
  std::ostringstream out;
  out << "Signal " << signo << " (" << signal_name(signo) << ") received by PID " << ::getpid();
  if (signo == SIGSEGV || signo == SIGBUS || signo == SIGFPE || signo == SIGILL) {
    out << ": " << ::strsignal(signo) << " at address " << info->si_addr;
    if (signo == SIGBUS) {
      const detail::BusErrorCause cause = detail::bus_error_cause(info->si_addr);
      out << cause.text;
      if (!cause.text.empty()) {
        // The rank as its launcher numbered it, also before ddx knew it (RANK, as ddx launch sets).
        const char* launcher_rank = std::getenv("RANK");
        const int rank = g_rank.load() >= 0 ? g_rank.load() : launcher_rank ? std::atoi(launcher_rank) : -1;
        events::Event("bus_error.shm_exhausted")
            .number("rank", rank)
            .text("file", cause.file)
            .text("tmpfs", cause.tmpfs)
            .real("free_bytes", cause.free_bytes)
            .real("size_bytes", cause.size_bytes)
            .emit();
      }
    }
  } else if (info->si_code <= 0) {
    out << ": sent by PID " << info->si_pid;  // kill()/raise(), not a fault
  }
  return out.str();
}

void on_fatal_signal(int signo, siginfo_t* info, void* ucontext) {
  if (signo == SIGABRT && g_report_done.load()) die_with(signo);
  if (!begin_report()) die_with(signo);
  detail::ErrorReport r = make_report(describe_signal(signo, info), 128 + signo);
  r.signo = signo;
  r.frames = detail::capture_signal_stack(ucontext, info->si_addr);
  publish(r);
  g_report_done = true;
  die_with(signo);
}

void on_terminate() {
  if (!begin_report()) die_with(SIGABRT);
  std::string message = "std::terminate called without an active exception";
  std::vector<StackFrame> frames = detail::capture_current_stack();
  if (std::exception_ptr current = std::current_exception()) {
    std::type_info* type = abi::__cxa_current_exception_type();
    std::string type_name = type ? detail::demangle(type->name()) : "unknown exception";
    try {
      std::rethrow_exception(current);
    } catch (const std::exception& e) {
      message = type_name + ": " + e.what();
    } catch (...) {
      message = "uncaught exception of type " + type_name;
    }
  }
  detail::ErrorReport r = make_report(message, 128 + SIGABRT);
  r.signo = SIGABRT;
  r.frames = std::move(frames);
  publish(r);
  g_report_done = true;
  die_with(SIGABRT);
}

void install_alternate_stack() {
  // Leaked on purpose: the main thread's handlers may run until the very end of the process.
  static char* stack_memory = new char[kAltStackSize];
  stack_t stack{};
  stack.ss_sp = stack_memory;
  stack.ss_size = kAltStackSize;
  stack.ss_flags = 0;
  ::sigaltstack(&stack, nullptr);
}

}  // namespace

void install_error_handlers() {
  // Rank from the launcher's environment until the program knows better.
  set_error_report_rank(env_int("RANK"), env_int("LOCAL_RANK"), env_int("WORLD_SIZE"));
  install_alternate_stack();
  if (g_report_reserve == MAP_FAILED) {
    g_report_reserve = ::mmap(nullptr, kReportReserve, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  }
  for (int signo : kFatalSignals) {
    struct sigaction action {};
    action.sa_sigaction = on_fatal_signal;
    action.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&action.sa_mask);
    // Other fatal signals wait while one is being reported.
    for (int other : kFatalSignals) sigaddset(&action.sa_mask, other);
    ::sigaction(signo, &action, nullptr);
  }
  std::set_terminate(on_terminate);
}

void set_error_report_rank(int rank, int local_rank, int world_size) {
  g_rank = rank;
  g_local_rank = local_rank;
  g_world_size = world_size;
}

void write_error_report(const std::string& message, int exit_code, bool with_stack) {
  detail::ErrorReport r = make_report(message, exit_code);
  if (with_stack) r.frames = detail::capture_current_stack();
  publish(r);
}

void write_verdict_report(const std::string& message, int exit_code) {
  detail::ErrorReport r = make_report(message, exit_code);
  r.verdict = true;
  const char* path = std::getenv("TORCHELASTIC_ERROR_FILE");
  if (path && *path && !detail::write_file_atomically(path, detail::error_report_to_json(r))) {
    write_stderr(rank_prefix(r) + "E could not write error file " + path + ": " + std::strerror(errno) + "\n");
  }
}

}  // namespace ddx
