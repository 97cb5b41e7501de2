#pragma once
// Capturing and symbolizing the current stack for crash reports (private to ddx_core).
// Everything here allocates: it is meant for a process that is about to die, where a readable
// trace is worth more than strict async-signal safety.
#include <string>
#include <vector>

#include "ddx/errors/error_report.h"

namespace ddx::detail {

// The stack of a thread interrupted by a signal, innermost first, starting at the faulting
// instruction (`ucontext` and `fault_address` come from the SA_SIGINFO handler), so the
// handler's own frames and the kernel's signal trampoline are not part of it.
std::vector<StackFrame> capture_signal_stack(void* ucontext, void* fault_address);

// The caller's stack, innermost first, with the crash machinery on top of it removed: frames up
// to and including the C++ runtime's throw/terminate functions and libc's abort/raise.
std::vector<StackFrame> capture_current_stack();

// "#0 function at file:line" lines, one per frame.
std::string format_stack(const std::vector<StackFrame>& frames);

// "std::runtime_error" for a mangled type name; the input when it cannot be demangled.
std::string demangle(const char* mangled);

}  // namespace ddx::detail
