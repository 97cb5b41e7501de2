// Stack capture through backward-cpp (libdw for function, file and line).
#include "stack_capture.h"

#include <cxxabi.h>
#include <ucontext.h>

#include <backward.hpp>
#include <cstdlib>
#include <memory>
#include <sstream>

namespace ddx::detail {
namespace {

constexpr size_t kMaxFrames = 48;

void* program_counter(void* ucontext) {
  auto* uc = static_cast<ucontext_t*>(ucontext);
#if defined(__x86_64__)
  return reinterpret_cast<void*>(uc->uc_mcontext.gregs[REG_RIP]);
#elif defined(__aarch64__)
  return reinterpret_cast<void*>(uc->uc_mcontext.pc);
#else
  (void)uc;
  return nullptr;
#endif
}

StackFrame to_frame(const backward::ResolvedTrace::SourceLoc& loc, const std::string& fallback) {
  StackFrame frame;
  frame.function = loc.function.empty() ? fallback : loc.function;
  frame.file = loc.filename;
  frame.line = static_cast<int>(loc.line);
  return frame;
}

std::vector<StackFrame> resolve(backward::StackTrace& trace) {
  backward::TraceResolver resolver;
  resolver.load_stacktrace(trace);
  std::vector<StackFrame> frames;
  for (size_t i = 0; i < trace.size(); ++i) {
    backward::ResolvedTrace resolved = resolver.resolve(trace[i]);
    // libdw names functions without their namespace or class ("TestBody"); the symbol table's
    // demangled name is qualified, so it wins for the function the machine code belongs to.
    // With inlining, `source` is the innermost inlined function and `inliners` the functions
    // it was inlined into, innermost first; the last of those is the symbol's function.
    const std::string& symbol = resolved.object_function;
    if (resolved.inliners.empty()) {
      frames.push_back(to_frame(resolved.source, symbol.empty() ? "??" : symbol));
      if (!symbol.empty()) frames.back().function = symbol;
      continue;
    }
    frames.push_back(to_frame(resolved.source, "??"));
    for (size_t k = 0; k < resolved.inliners.size(); ++k) {
      frames.push_back(to_frame(resolved.inliners[k], "??"));
      if (k + 1 == resolved.inliners.size() && !symbol.empty()) frames.back().function = symbol;
    }
  }
  // The unwinder's last step past _start resolves to nothing.
  while (!frames.empty() && frames.back().function == "??" && frames.back().file.empty()) frames.pop_back();
  return frames;
}

bool starts_with(const std::string& text, const char* prefix) {
  return text.rfind(prefix, 0) == 0;
}

// Frames of the machinery that turns an error into a report, which the reader does not care
// about: backward itself, our handlers, the C++ runtime's throw/terminate path, libc's abort.
bool is_crash_machinery(const std::string& function) {
  static const char* const kPrefixes[] = {
      "backward::", "ddx::detail::", "ddx::(anonymous namespace)::", "ddx::write_error_report",
      "__cxxabiv1::", "std::terminate", "__cxa_", "_Unwind_", "__gxx_personality",
      "std::rethrow_exception", "__pthread_kill", "__GI_", "__restore_rt", "__assert_fail",
      "__assert_perror_fail"};
  static const char* const kExact[] = {"abort", "raise", "gsignal", "pthread_kill"};
  for (const char* prefix : kPrefixes) {
    if (starts_with(function, prefix)) return true;
  }
  for (const char* name : kExact) {
    if (function == name) return true;
  }
  return false;
}

}  // namespace

std::vector<StackFrame> capture_signal_stack(void* ucontext, void* fault_address) {
  backward::StackTrace trace;
  void* pc = ucontext ? program_counter(ucontext) : nullptr;
  if (pc) {
    // Starts the trace at the faulting instruction: everything above it is the handler.
    trace.load_from(pc, kMaxFrames, ucontext, fault_address);
  } else {
    trace.load_here(kMaxFrames, ucontext, fault_address);
  }
  std::vector<StackFrame> frames = resolve(trace);
  // A SIGABRT's PC is inside libc's raise/abort; the interesting frame is the one that called it.
  size_t skip = 0;
  while (skip < frames.size() && skip < 8 && is_crash_machinery(frames[skip].function)) ++skip;
  if (skip == frames.size()) skip = 0;
  frames.erase(frames.begin(), frames.begin() + static_cast<long>(skip));
  return frames;
}

std::vector<StackFrame> capture_current_stack() {
  backward::StackTrace trace;
  trace.load_here(kMaxFrames + 16);
  std::vector<StackFrame> frames = resolve(trace);
  // Skip through the last crash-machinery frame among the top ones: for an uncaught exception
  // that is __cxa_throw, so the top frame left is the function that threw.
  size_t last_machinery = 0;
  bool found = false;
  for (size_t i = 0; i < frames.size() && i < 24; ++i) {
    if (is_crash_machinery(frames[i].function)) {
      last_machinery = i;
      found = true;
    }
  }
  if (found && last_machinery + 1 < frames.size()) {
    frames.erase(frames.begin(), frames.begin() + static_cast<long>(last_machinery + 1));
  }
  if (frames.size() > kMaxFrames) frames.resize(kMaxFrames);
  return frames;
}

std::string format_stack(const std::vector<StackFrame>& frames) {
  std::ostringstream out;
  for (size_t i = 0; i < frames.size(); ++i) {
    const StackFrame& f = frames[i];
    out << "#" << i << " " << f.function;
    if (!f.file.empty()) out << " at " << f.file << ":" << f.line;
    out << "\n";
  }
  return out.str();
}

std::string demangle(const char* mangled) {
  if (!mangled) return "unknown";
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> text(abi::__cxa_demangle(mangled, nullptr, nullptr, &status),
                                               std::free);
  return status == 0 && text ? std::string(text.get()) : std::string(mangled);
}

}  // namespace ddx::detail
